//! `gpumon --prometheus URL`: the cluster view. The fleet comes from the Prometheus server
//! that scrapes every node's `gpumon serve`; the loop and the screens are the local ones.

use anyhow::Result;
use tokio::sync::mpsc;

use super::*;
use crate::cli::{UsageError, WatchArgs};
use crate::model::fleet::Selector;
use crate::source::prometheus::client::Url;
use crate::source::prometheus::http_config::HttpConfig;
use crate::source::prometheus::{self, Options};
use crate::tui::app::{App, FleetView, SourceKind, View};

pub(super) async fn fleet_tui(w: WatchArgs, settings: &Settings) -> Result<i32> {
    let f = &w.fleet;
    let url = f.prometheus.as_deref().unwrap_or_default();
    // What writes this machine's samples has nothing to write here: said, not ignored.
    for (set, flag) in [
        (w.record.is_some(), "--record"),
        (w.out.csv.is_some(), "--csv"),
        (w.out.jsonl.is_some(), "--jsonl"),
        (w.out.serve.is_some(), "--serve"),
        (w.out.headless, "--headless"),
        (w.out.alerts_jsonl.is_some(), "--alerts-jsonl"),
        (w.out.exit_on_alert.is_some(), "--exit-on-alert"),
    ] {
        if set {
            return Err(UsageError(format!(
                "{flag} does not apply to --prometheus (the nodes record and alert themselves; \
                 use Prometheus's own rules, `gpumon dashboard alert-rules`)"
            ))
            .into());
        }
    }
    let url = Url::parse(url).map_err(UsageError)?;
    let http = match &f.prometheus_http_config {
        Some(p) => HttpConfig::load(p).map_err(UsageError)?,
        None => HttpConfig::default(),
    };
    let text = f.selector.clone().unwrap_or_default();
    let selector = Selector::parse(&text).map_err(|e| UsageError(format!("--match: {e}")))?;
    let (tx, rx) = mpsc::channel(QUEUE);
    let open = prometheus::spawn(
        Options {
            url: url.clone(),
            http,
            refresh: f.prometheus_refresh,
            timeout: f.prometheus_timeout,
        },
        tx.clone(),
    )
    .map_err(UsageError)?;
    let mut pipe = pipeline(&w.out, None, &w.filter, settings).await?;
    pipe.remote_alerts = true;
    let mut app = App::new(SourceKind::Prometheus { url: url.show() }, pipe);
    app.fleet = Some(Box::new(FleetView::new(url.show(), selector, text)));
    app.view = View::Nodes;
    app.bell = w.out.bell;
    app.apply_settings(settings);
    run_tui_with(app, tx, rx, theme(&w.display, settings), None, Some(open)).await
}
