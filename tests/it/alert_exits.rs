//! An alert tied to a process ends when the process does: PID 600 of the demo
//! and of the first corpus exits 1.5 s before its recording ends; its grab-all alert stayed
//! active while its row read `gone`. Now the row reads `exited` and the alert is past,
//! saying why, in both: the companion's (it said goodbye) and NVML's only.

use gpumon::model::alerts::AlertKind;
use gpumon::model::exit::ExitCause;

use crate::support::{app_from, render, theme};

#[test]
fn a_grab_all_alert_ends_with_its_process_and_the_row_reads_exited() {
    for rec in [
        "../../assets/demo-companion.gpumon.jsonl.gz",
        "../corpus/corpus_leak.jsonl",
    ] {
        let app = app_from(rec, None);
        let (state, alerts) = (&app.pipe.state, &app.pipe.alerts);
        let exit = state.procs[&600].exit.expect("600 exited");
        assert_eq!(exit.cause, ExitCause::Exited, "{rec}");
        let past = alerts
            .history()
            .find(|a| a.pid == Some(600) && a.kind == AlertKind::GrabAll)
            .unwrap_or_else(|| panic!("{rec}: 600's grab-all is not past"));
        assert!(
            past.message.ends_with("(ended: process exited)"),
            "{rec}: {}",
            past.message
        );
        // One decision for the row and the alerts: no active alert on an exited process.
        for a in alerts.active() {
            let p = a.pid.and_then(|pid| state.procs.get(&pid));
            assert!(
                p.is_none_or(|p| p.exit.is_none()),
                "{rec}: {:?} active on an exited process",
                a.key()
            );
        }
        let screen = render(&app, 120, 40, &theme(false));
        let row = screen
            .lines()
            .find(|l| l.contains(" 600 root "))
            .unwrap_or_else(|| panic!("{rec}: no row for 600\n{screen}"));
        assert!(
            row.contains("exited") && !row.contains("gone"),
            "{rec}: {row}"
        );
    }
}
