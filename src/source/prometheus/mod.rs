//! The fleet from a Prometheus server that scrapes every node's `gpumon serve`: one batched
//! instant query per refresh for every node's current state, and for the one node a person
//! opens, its full series now and its charted history once. A source like NVML or replay:
//! it sends what it read as loop events and never touches the terminal.

pub mod answer;
pub mod client;
pub mod fleet_of;
pub mod frames_of;
pub mod http_config;
pub mod news;

pub use news::{FleetNews, Known, OpenNews, QueryStatus};

use std::time::{Duration, Instant};

use tokio::sync::mpsc::Sender;
use tokio::sync::watch;

use crate::model::time::Ts;
use crate::source::event::Event;
use client::{Client, Url};
use http_config::HttpConfig;

/// How far back a node's charts reach when it is opened, and at what resolution: enough
/// for the chart's default spans without asking Prometheus for more than a few thousand
/// points per series.
pub const HISTORY_MS: i64 = 60 * 60 * 1000;
const HISTORY_POINTS: i64 = 720;

#[derive(Debug, Clone)]
pub struct Options {
    pub url: Url,
    pub http: HttpConfig,
    pub refresh: Duration,
    pub timeout: Duration,
}

/// What the loop tells the source: which node is open (None: the node list only).
pub type OpenNode = watch::Sender<Option<String>>;

/// Start the source on a thread of its own (its HTTP client runs on a runtime of its own,
/// so a slow Prometheus never holds up the loop's drawing or keys).
pub fn spawn<I: Send + 'static>(opts: Options, tx: Sender<Event<I>>) -> Result<OpenNode, String> {
    let client = Client::new(opts.url.clone(), opts.http.clone(), opts.timeout)?;
    let (open_tx, open_rx) = watch::channel(None);
    std::thread::Builder::new()
        .name("prometheus".into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = tx.blocking_send(Event::Quit(format!(
                        "cannot start the Prometheus source: {e}"
                    )));
                    return;
                }
            };
            rt.block_on(run(client, opts, open_rx, tx));
        })
        .map_err(|e| format!("cannot start the Prometheus thread: {e}"))?;
    Ok(open_tx)
}

async fn run<I>(
    mut client: Client,
    opts: Options,
    mut open_rx: watch::Receiver<Option<String>>,
    tx: Sender<Event<I>>,
) {
    let interval_ms = opts.refresh.as_millis() as u64;
    let mut asked_known = false;
    let mut feed: Option<frames_of::NodeFeed> = None;
    loop {
        let start = Instant::now();
        let at = now_ms();
        let time = format!("{:.3}", at as f64 / 1000.0);
        let mut status = QueryStatus::default();
        let mut nodes = None;
        match query(&mut client, fleet_of::FLEET_QUERY, &time, &mut status).await {
            Ok(series) => {
                let mut known = Vec::new();
                if !asked_known {
                    // Best effort: without it, nodes already gone are simply not listed.
                    if let Ok(k) =
                        query(&mut client, fleet_of::KNOWN_QUERY, &time, &mut status).await
                    {
                        known = fleet_of::known(&k);
                        asked_known = true;
                    }
                }
                nodes = Some((fleet_of::nodes(&series), known));
            }
            Err(e) => status.error = Some(e),
        }
        let open = open_rx.borrow_and_update().clone();
        let open_news = match open {
            None => {
                feed = None;
                None
            }
            Some(node) => Some(
                open_round(
                    &mut client,
                    &mut feed,
                    &node,
                    at,
                    &time,
                    interval_ms,
                    &mut status,
                )
                .await,
            ),
        };
        status.took_ms = start.elapsed().as_millis() as u64;
        let news = FleetNews {
            at,
            nodes,
            status,
            open: open_news,
        };
        if tx.send(Event::Fleet(Box::new(news))).await.is_err() {
            return;
        }
        let wait = opts.refresh.saturating_sub(start.elapsed());
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            // A node opened or closed: read it now, not at the next refresh.
            r = open_rx.changed() => if r.is_err() { return },
        }
    }
}

async fn open_round(
    client: &mut Client,
    feed: &mut Option<frames_of::NodeFeed>,
    node: &str,
    at: Ts,
    time: &str,
    interval_ms: u64,
    status: &mut QueryStatus,
) -> OpenNews {
    let reset = feed.as_ref().is_none_or(|f| f.node != node);
    let f = match feed {
        Some(f) if !reset => f,
        _ => feed.insert(frames_of::NodeFeed::new(node)),
    };
    let mut frames = Vec::new();
    let mut error = None;
    if reset {
        let step = (HISTORY_MS / HISTORY_POINTS).max(interval_ms as i64) as f64 / 1000.0;
        let start = format!("{:.3}", (at - HISTORY_MS) as f64 / 1000.0);
        let q = frames_of::history_query(node);
        let params = [
            ("query", q.as_str()),
            ("start", start.as_str()),
            ("end", time),
            ("step", &format!("{step:.3}")),
        ];
        match client.get("/api/v1/query_range", &params).await {
            Ok(a) => {
                note(status, &a);
                match answer::parse(&a.body) {
                    Ok(d) => {
                        status.warnings.extend(d.warnings);
                        status.series += d.series.len();
                        frames = frames_of::history(f, &d.series, interval_ms);
                    }
                    Err(e) => error = Some(format!("history: {e}")),
                }
            }
            Err(e) => error = Some(format!("history: {e}")),
        }
    }
    match query(client, &frames_of::node_query(node), time, status).await {
        Ok(series) => frames.extend(f.frames(&series, at, interval_ms)),
        Err(e) => error = Some(e),
    }
    OpenNews {
        node: node.to_string(),
        reset,
        frames,
        error,
    }
}

async fn query(
    client: &mut Client,
    expr: &str,
    time: &str,
    status: &mut QueryStatus,
) -> Result<Vec<answer::Series>, String> {
    let a = client
        .get("/api/v1/query", &[("query", expr), ("time", time)])
        .await?;
    note(status, &a);
    let d = answer::parse(&a.body)?;
    status.series += d.series.len();
    status.warnings.extend(d.warnings);
    Ok(d.series)
}

fn note(status: &mut QueryStatus, a: &client::Answer) {
    status.wire_bytes += a.wire_bytes;
}

fn now_ms() -> Ts {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as Ts)
}
