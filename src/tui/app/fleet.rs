//! The cluster view's state: the fleet as Prometheus last told it, the node list's order,
//! selection and selector, and which node is open. An open node's data flows into `pipe`
//! like any source's, so its GPU cards, process rows, allocator lines and alert panel are
//! the local screens.

use super::{App, Effect, View};
use crate::model::fleet::{Fleet, NodeSort, Selector};
use crate::model::time::Ts;
use crate::source::prometheus::{FleetNews, QueryStatus};

/// Nodes stale this long are forgotten: taken out of the fleet, not failing.
const FORGET_STALE_MS: i64 = 24 * 3600 * 1000;

#[derive(Debug, Default)]
pub struct FleetView {
    /// The server, as the status line names it (no credentials).
    pub url: String,
    pub fleet: Fleet,
    pub status: QueryStatus,
    /// When the last round ran, and when the fleet was last read whole (Unix ms).
    pub asked_at: Ts,
    pub read_at: Option<Ts>,
    pub sort: NodeSort,
    pub invert: bool,
    pub selector: Selector,
    /// What was typed after `/` in the node list (parsed into `selector` as it is typed).
    pub selector_text: String,
    /// The selected node, by name, and its row.
    pub sel: Option<String>,
    pub row: usize,
    /// The node whose screens are shown.
    pub open: Option<String>,
    /// The node list shows the jobs across the fleet instead (`J`).
    pub jobs: bool,
    /// The open node's last query error.
    pub open_error: Option<String>,
}

impl FleetView {
    pub fn new(url: String, selector: Selector, selector_text: String) -> FleetView {
        FleetView {
            url,
            selector,
            selector_text,
            ..FleetView::default()
        }
    }

    /// The node list as drawn: selected nodes in the chosen order.
    pub fn rows(&self) -> Vec<&crate::model::fleet::Node> {
        self.fleet.rows(self.sort, self.invert, &self.selector)
    }

    /// How old the fleet on screen is when the last round could not read it.
    pub fn behind_ms(&self) -> Option<i64> {
        let read = self.read_at?;
        (self.status.error.is_some()).then(|| self.asked_at - read)
    }
}

impl App {
    pub fn is_fleet(&self) -> bool {
        self.fleet.is_some()
    }

    pub(super) fn fleet_news(&mut self, news: FleetNews) -> Option<Effect> {
        let fv = self.fleet.as_deref_mut()?;
        fv.asked_at = news.at;
        if let Some((nodes, known)) = news.nodes {
            fv.fleet.merge(nodes, &known, news.at);
            fv.fleet.prune(FORGET_STALE_MS);
            fv.read_at = Some(news.at);
        }
        fv.status = news.status;
        let mut effect = None;
        if let Some(open) = news
            .open
            .filter(|o| fv.open.as_deref() == Some(o.node.as_str()))
        {
            fv.open_error = open.error;
            if open.reset {
                self.pipe.reset();
                self.settling = false;
            }
            for f in &open.frames {
                effect = effect.or(self.apply(f));
            }
            self.adopt_open_alerts(news.at);
        }
        self.fleet_notice();
        self.sync_nodes();
        effect
    }

    /// The open node's alerts, as its gpumon exports them, into the alert engine.
    fn adopt_open_alerts(&mut self, at: Ts) {
        let Some(fv) = self.fleet.as_deref() else {
            return;
        };
        let Some(node) = fv.open.as_ref().and_then(|n| fv.fleet.nodes.get(n)) else {
            return;
        };
        // A stale node's alerts stand as it last exported them: they are not cleared by
        // silence from an exporter that stopped.
        if node.stale_ms(fv.fleet.at).is_some() {
            return;
        }
        let findings = node.alerts.iter().filter_map(|a| a.finding(node)).collect();
        self.pipe.adopt_alerts(at, findings);
    }

    /// The notice line: what is wrong with the data on screen, most serious first.
    fn fleet_notice(&mut self) {
        let Some(fv) = self.fleet.as_deref() else {
            return;
        };
        let ago = |ms: i64| crate::fmt::duration(ms);
        self.notice = if let Some(e) = &fv.status.error {
            // The age first: it is what a person must know, and it survives a narrow pane.
            Some(match fv.behind_ms() {
                Some(ms) => format!("data from {} ago · Prometheus: {e}", ago(ms)),
                None => format!("nothing read yet · Prometheus: {e}"),
            })
        } else if let Some(stale) = fv
            .open
            .as_ref()
            .and_then(|n| fv.fleet.nodes.get(n))
            .and_then(|n| n.stale_ms(fv.fleet.at))
            .filter(|_| self.view != View::Nodes)
        {
            Some(format!(
                "STALE: {} has not been scraped for {}; its last values",
                fv.open.as_deref().unwrap_or(""),
                ago(stale)
            ))
        } else if let Some(e) = fv.open_error.as_ref().filter(|_| self.view != View::Nodes) {
            Some(format!("node query: {e}"))
        } else {
            fv.status
                .warnings
                .first()
                .map(|w| format!("Prometheus: partial answer: {w}"))
        };
    }

    /// Keep the selected node selected as the list reorders; its neighbour when it went.
    pub(super) fn sync_nodes(&mut self) {
        let Some(fv) = self.fleet.as_deref() else {
            return;
        };
        let names: Vec<String> = if fv.jobs {
            fv.fleet.jobs().into_iter().map(|j| j.name).collect()
        } else {
            fv.rows().iter().map(|n| n.name.clone()).collect()
        };
        let found = crate::tui::selection::locate(&names, fv.sel.as_ref(), fv.row);
        let Some(fv) = self.fleet.as_deref_mut() else {
            return;
        };
        match found {
            Some((i, _)) => {
                fv.row = i;
                fv.sel = Some(names[i].clone());
            }
            None => {
                fv.row = 0;
                fv.sel = None;
            }
        }
    }

    pub(super) fn move_node(&mut self, delta: isize) {
        let Some(fv) = self.fleet.as_deref_mut() else {
            return;
        };
        let n = if fv.jobs {
            fv.fleet.jobs().len()
        } else {
            fv.rows().len()
        };
        if let Some(last) = n.checked_sub(1) {
            fv.row = fv.row.min(last).saturating_add_signed(delta).min(last);
            fv.sel = None;
        }
        self.sync_nodes_at_row();
    }

    fn sync_nodes_at_row(&mut self) {
        let Some(fv) = self.fleet.as_deref_mut() else {
            return;
        };
        let names: Vec<String> = if fv.jobs {
            fv.fleet.jobs().into_iter().map(|j| j.name).collect()
        } else {
            fv.rows().iter().map(|n| n.name.clone()).collect()
        };
        fv.sel = names.get(fv.row).cloned();
    }

    /// Enter on the node list: open the selected node (in the jobs list: the node of the
    /// job's rank that uses most memory).
    pub(super) fn open_node(&mut self) -> Option<Effect> {
        let fv = self.fleet.as_deref_mut()?;
        let name = if fv.jobs {
            let job = fv
                .fleet
                .jobs()
                .into_iter()
                .find(|j| Some(&j.name) == fv.sel.as_ref())?;
            job.top.map(|t| t.0)?
        } else {
            fv.sel.clone()?
        };
        let stale = fv.fleet.nodes.get(&name).is_some_and(|n| n.gpus.is_empty());
        if stale {
            self.flash = Some(format!("{name}: nothing read from it yet (stale)"));
            return None;
        }
        fv.open = Some(name.clone());
        fv.open_error = None;
        self.pipe.reset();
        self.gpu = 0;
        self.sel_pid = None;
        self.sel_chosen = false;
        self.proc_row = 0;
        self.filter.clear();
        self.go(View::Overview);
        self.flash = Some(format!(
            "{name}: reading its series… (Esc: back to the nodes)"
        ));
        Some(Effect::Open(Some(name)))
    }

    /// Back on the node list: the node's model is dropped, its queries stop.
    pub(super) fn close_node(&mut self) -> Option<Effect> {
        let fv = self.fleet.as_deref_mut()?;
        fv.open.take()?;
        fv.open_error = None;
        self.pipe.reset();
        self.back.clear();
        self.fleet_notice();
        Some(Effect::Open(None))
    }

    /// A key on the node list.
    pub(super) fn node_action(&mut self, a: crate::tui::keys::Action) -> Option<Effect> {
        use crate::tui::keys::Action;
        match a {
            Action::Up => self.move_node(-1),
            Action::Down => self.move_node(1),
            Action::PageUp => self.move_node(-10),
            Action::PageDown => self.move_node(10),
            Action::Top => self.move_node(isize::MIN / 2),
            Action::Bottom => self.move_node(isize::MAX / 2),
            Action::Enter => return self.open_node(),
            Action::Sort => {
                let fv = self.fleet.as_deref_mut()?;
                fv.sort = fv.sort.next();
                fv.invert = false;
                self.flash = Some(format!("nodes sorted by {}", fv.sort.label()));
            }
            Action::Invert => {
                let fv = self.fleet.as_deref_mut()?;
                fv.invert = !fv.invert;
            }
            Action::FoldJobs => {
                let fv = self.fleet.as_deref_mut()?;
                fv.jobs = !fv.jobs;
                fv.row = 0;
                fv.sel = None;
                self.flash = Some(if fv.jobs {
                    "jobs across the fleet (J: back to the nodes)".into()
                } else {
                    "nodes (J: the jobs across them)".into()
                });
            }
            Action::Filter => self.prompt = Some(super::Prompt::Filter),
            Action::Alerts | Action::Ack | Action::Kill => {
                self.flash = Some(
                    "open a node (Enter) for its alerts; the list shows each node's worst".into(),
                );
            }
            _ => {
                self.flash =
                    Some("on the node list: Enter opens a node, / selects, s sorts".into());
            }
        }
        self.sync_nodes();
        None
    }

    /// The node selector typed after `/`: parsed as it is typed; a term that cannot parse
    /// says why and leaves the last good selection in force.
    pub(super) fn selector_typed(&mut self) {
        let Some(fv) = self.fleet.as_deref_mut() else {
            return;
        };
        match Selector::parse(&fv.selector_text) {
            Ok(s) => fv.selector = s,
            Err(e) => self.flash = Some(e),
        }
        self.sync_nodes();
    }
}
