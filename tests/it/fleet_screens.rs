//! The node list drawn from a real answer of Prometheus (three `gpumon serve --replay`
//! exporters of real H200 recordings, `tests/fixtures/fleet_answer.json`), one node gone
//! stale in a later round: at 40x12, 80x24, 120x40 and 200x60, with no two pieces on one
//! cell, the worst node first, the stale one marked with its age.

use gpumon::model::fleet::Selector;
use gpumon::pipeline::Pipeline;
use gpumon::source::prometheus::{FleetNews, QueryStatus, answer, fleet_of};
use gpumon::tui::app::{App, FleetView, SourceKind, View};
use gpumon::tui::event::Event;

use crate::support::{fixture, render, theme};

fn app() -> App {
    let body = std::fs::read(fixture("fleet_answer.json")).expect("fixture");
    let series = answer::parse(&body).expect("a Prometheus answer").series;
    let url = "http://prometheus.lan:9090".to_string();
    let mut app = App::new(
        SourceKind::Prometheus { url: url.clone() },
        Pipeline::default(),
    );
    app.fleet = Some(Box::new(FleetView::new(
        url,
        Selector::default(),
        String::new(),
    )));
    app.view = View::Nodes;
    let round = |at: i64, nodes| {
        Event::Fleet(Box::new(FleetNews {
            at,
            nodes: Some((nodes, Vec::new())),
            status: QueryStatus {
                took_ms: 7,
                wire_bytes: 935,
                series: 40,
                ..QueryStatus::default()
            },
            open: None,
        }))
    };
    let all = fleet_of::nodes(&series);
    assert_eq!(all.len(), 3);
    app.update(round(1_000_000, all.clone()));
    let later: Vec<_> = all.into_iter().filter(|n| n.name != "gpu-node-2").collect();
    app.update(round(1_042_000, later));
    app
}

#[test]
fn the_node_list_at_four_sizes() {
    let app = app();
    for (w, h) in [(40, 12), (80, 24), (120, 40), (200, 60)] {
        let screen = render(&app, w, h, &theme(false));
        let lines: Vec<&str> = screen.lines().collect();
        let first = lines
            .iter()
            .position(|l| l.starts_with("gpu-node"))
            .expect("rows");
        assert!(
            lines[first].starts_with("gpu-node-3"),
            "the node with alerts first:\n{screen}"
        );
        let stale = lines
            .iter()
            .find(|l| l.starts_with("gpu-node-2"))
            .expect("kept");
        assert!(stale.contains("STALE 42s"), "{w}x{h}:\n{screen}");
        assert!(
            lines[lines.len() - 2].starts_with("gpu-node-3:"),
            "{screen}"
        );
        insta::assert_snapshot!(format!("nodes_{w}x{h}"), screen);
        let mut buf = ratatui::buffer::Buffer::empty(ratatui::layout::Rect::new(0, 0, w, h));
        let (clashes, _) = gpumon::tui::ui::draw_checked(&mut buf, &app, &theme(false));
        assert!(clashes.is_empty(), "{w}x{h}: {clashes:?}");
    }
}

#[test]
fn jobs_across_the_fleet() {
    let mut app = app();
    app.update(Event::from(crossterm::event::KeyEvent::from(
        crossterm::event::KeyCode::Char('J'),
    )));
    let screen = render(&app, 100, 16, &theme(false));
    assert!(screen.contains("job.py@127.0.0.1:29521"), "{screen}");
    insta::assert_snapshot!("jobs_100x16", screen);
}
