//! The allocator in two lines, for a detail pane too short for the allocator panel (80×24):
//! the framework and its policy, and the last OOM with what was asked and what was free,
//! so neither needs a larger terminal to be read.

use ratatui::text::{Line, Span};

use super::allocator::oom_line;
use super::theme::Theme;
use crate::model::allocator::{DevAlloc, ProcAlloc};

/// The lines, most telling first: the OOM (when there was one), then the policy.
pub(crate) fn lines(pa: &ProcAlloc, dev: Option<&DevAlloc>, theme: &Theme) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    if let Some(l) = dev.and_then(|d| oom_line(d, theme)) {
        out.push(l);
    }
    let policy = super::policy::policy(pa).unwrap_or_else(|| "allocator policy unknown".into());
    out.push(Line::from(vec![
        Span::styled(
            format!("{} ", super::policy::framework_label(pa)),
            theme.title(),
        ),
        Span::styled(policy, theme.normal()),
    ]));
    out
}
