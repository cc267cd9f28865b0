//! The configuration file's screen settings, turned into the view's state when a TUI starts.

use super::{App, View};
use crate::settings::{Settings, StartSort, StartView};
use crate::tui::selection::{Sort, SortKey};

impl App {
    /// Starting view, window and sort; how long exited processes stay (a replay keeps them to
    /// its end unless the file says otherwise).
    pub fn apply_settings(&mut self, s: &Settings) {
        let replay_keeps = self.is_replay().then_some(None);
        if let Some(keep) = s.keep_exited.or(replay_keeps) {
            self.pipe.state.keep_exited_ms = keep;
        }
        if let Some(v) = s.view {
            self.view = match v {
                StartView::Overview => View::Overview,
                StartView::Detail => View::Detail,
                StartView::Alerts => View::Alerts,
            };
        }
        if let Some(c) = s.columns {
            self.columns = c;
        }
        if let Some(z) = s.zoom {
            self.zoom = z;
        }
        if let Some(key) = s.sort {
            let key = match key {
                StartSort::Used => SortKey::Used,
                StartSort::Peak => SortKey::Peak,
                StartSort::Growth => SortKey::Growth,
                StartSort::Pid => SortKey::Pid,
                StartSort::Name => SortKey::Name,
            };
            self.sort = Sort {
                key,
                desc: key.default_desc(),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::app::{SourceKind, ZOOMS};

    fn app(replay: bool) -> App {
        let source = if replay {
            SourceKind::Replay {
                file: "f".into(),
                demo: false,
            }
        } else {
            SourceKind::Live { interval_ms: 1000 }
        };
        App::new(source, crate::pipeline::Pipeline::default())
    }

    /// Unset in the file, the window is the mode's: 5 minutes live, the whole run in a replay.
    #[test]
    fn the_default_window_is_the_apps() {
        assert_eq!(ZOOMS[app(false).zoom].1, "5m");
        assert_eq!(ZOOMS[app(true).zoom].1, "all");
    }

    #[test]
    fn the_sort_key_sets_the_app_sort_with_its_natural_direction() {
        let mut a = app(false);
        assert_eq!(a.sort, Sort::default());
        a.apply_settings(&Settings {
            sort: Some(StartSort::Pid),
            ..Settings::default()
        });
        assert_eq!(
            a.sort,
            Sort {
                key: SortKey::Pid,
                desc: false
            }
        );
        a.apply_settings(&Settings {
            sort: Some(StartSort::Growth),
            view: Some(StartView::Detail),
            zoom: Some(3),
            ..Settings::default()
        });
        assert_eq!(a.sort.key, SortKey::Growth);
        assert!(a.sort.desc);
        assert_eq!((a.view, a.zoom), (View::Detail, 3));
    }

    #[test]
    fn exited_processes_stay_10_min_live_the_whole_replay_or_as_the_file_says() {
        use crate::model::state::KEEP_EXITED_LIVE_MS;
        let keep = |replay: bool, keep_exited: Option<Option<i64>>| {
            let mut a = app(replay);
            a.apply_settings(&Settings {
                keep_exited,
                ..Settings::default()
            });
            a.pipe.state.keep_exited_ms
        };
        assert_eq!(keep(false, None), Some(KEEP_EXITED_LIVE_MS));
        assert_eq!(keep(true, None), None);
        assert_eq!(keep(false, Some(None)), None);
        assert_eq!(keep(true, Some(Some(30_000))), Some(30_000));
    }
}
