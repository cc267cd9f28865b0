//! The process table's columns. Each column answers, in one arm of `ProcColumn::spec`, what
//! its title is, how wide it is, when it is shown, what it sorts by, which legend entry
//! explains it and what its cell holds; the header and every row are laid out from the
//! same answers, so a title always sits over its numbers and a new column is one variant
//! and one arm (the compiler finds the arm missing).

use ratatui::style::Style;
use ratatui::text::{Line, Span};

use super::legend::{self, Term};
use super::theme::Theme;
use crate::fmt::human;
use crate::model::exit::{Exit, ExitCause};
use crate::model::mapping::Mapping;
use crate::model::state::{ProcGpu, ProcState, State};
use crate::model::time::Ts;
use crate::settings::ExtraColumns;
use crate::tui::selection::SortKey;

macro_rules! columns {
    ($($(#[$doc:meta])* $name:ident),* $(,)?) => {
        /// A column of the process table, left to right.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum ProcColumn {
            $($(#[$doc])* $name),*
        }

        impl ProcColumn {
            /// Every column, in the order the table draws them.
            pub const ALL: &'static [ProcColumn] = &[$(ProcColumn::$name),*];
        }
    };
}

columns! {
    Pid,
    User,
    /// The one column of no fixed width: it takes what the others leave.
    Command,
    /// The card's index inside the process (`cuda:1`, after `CUDA_VISIBLE_DEVICES`).
    Cuda,
    Used,
    Peak,
    /// In the peak's place while the table is sorted by growth.
    Growth,
    /// The optional columns (`Spec::extra`), in the order they are given room.
    Sm,
    Cpu,
    Rss,
    Time,
    Container,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// A column's cells: `gap` blank cells before it (styled as the cell, as they always were),
/// then `width` cells, or, for `Rest`, whatever the fixed columns leave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Width {
    Fixed { gap: u16, width: u16, align: Align },
    Rest { gap: u16 },
}

impl Width {
    fn gap(self) -> u16 {
        match self {
            Width::Fixed { gap, .. } | Width::Rest { gap } => gap,
        }
    }
}

/// What a row's cells read.
pub struct RowCtx<'a> {
    pub p: &'a ProcState,
    pub pg: &'a ProcGpu,
    /// The data-time clock (a process NVML stopped listing before it is `gone`).
    pub now: Ts,
    /// The state the row is drawn from; `None` for a row drawn alone (`procs::proc_line`).
    pub state: Option<&'a State>,
    pub theme: &'a Theme,
}

/// Everything a column says about itself.
pub struct Spec {
    pub title: &'static str,
    pub width: Width,
    /// Whether a table `table_w` wide, sorted by `sort`, shows the column.
    pub shown: fn(table_w: u16, sort: Option<SortKey>) -> bool,
    /// The sort key a click on the title picks (its title is `SortKey::column`).
    pub sort: Option<SortKey>,
    /// The legend entry that explains what the cells show, if a word needs one.
    pub legend: Option<Term>,
    /// The cell's pieces, given the cell's width (only `Rest` columns need it: a fixed
    /// cell is padded to its width).
    pub cell: fn(&RowCtx, usize) -> Vec<Span<'static>>,
    /// An optional column: the data it needs (`Table::has`); given room by `layout` after
    /// the others, while the command keeps enough.
    pub extra: Option<Extra>,
}

/// The data an optional column shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Extra {
    /// NVML's per-process utilisation.
    Sm,
    /// Host CPU, resident memory, start time (/proc).
    Host,
    /// The container (Kubernetes pod and container, or the cgroup's id).
    Container,
}

/// Which optional columns have data in the view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Has {
    pub sm: bool,
    pub host: bool,
    pub container: bool,
}

impl Has {
    fn any(self, e: Extra) -> bool {
        match e {
            Extra::Sm => self.sm,
            Extra::Host => self.host,
            Extra::Container => self.container,
        }
    }
}

/// How a table is drawn: its sort, and which optional columns it offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Table {
    pub sort: Option<SortKey>,
    pub extra: ExtraColumns,
    pub has: Has,
}

impl From<Option<SortKey>> for Table {
    /// A table with no optional data: the fixed columns only.
    fn from(sort: Option<SortKey>) -> Table {
        Table {
            sort,
            ..Table::default()
        }
    }
}

/// Cells the command keeps before an optional column is given room: where it is wide
/// (`auto`), and wherever (`on`, asked for with `o`).
const COMMAND_AUTO: u16 = 48;
const COMMAND_ON: u16 = 14;

/// Narrower tables drop the user and the last amount.
const WIDE: u16 = 50;

impl ProcColumn {
    pub fn spec(self) -> Spec {
        use Align::{Left, Right};
        let fixed = |gap, width, align| Width::Fixed { gap, width, align };
        match self {
            ProcColumn::Pid => Spec {
                title: "PID",
                width: fixed(0, 7, Right),
                shown: |_, _| true,
                sort: Some(SortKey::Pid),
                legend: None,
                extra: None,
                cell: |r, _| vec![Span::raw(r.p.info.pid.to_string())],
            },
            ProcColumn::User => Spec {
                title: "USER",
                width: fixed(1, 8, Left),
                shown: |w, _| w >= WIDE,
                sort: None,
                legend: None,
                extra: None,
                cell: |r, _| {
                    let user = r.p.info.user.as_deref().unwrap_or("?");
                    vec![Span::raw(user.chars().take(8).collect::<String>())]
                },
            },
            ProcColumn::Command => Spec {
                title: "COMMAND",
                width: Width::Rest { gap: 1 },
                shown: |_, _| true,
                sort: Some(SortKey::Name),
                legend: None,
                extra: None,
                cell: command_cell,
            },
            ProcColumn::Cuda => Spec {
                title: "CUDA",
                width: fixed(1, 8, Left),
                shown: |_, _| true,
                sort: None,
                legend: Some(legend::CUDA),
                extra: None,
                cell: |r, _| {
                    let style = mapping_style(&r.pg.mapping, r.theme);
                    vec![Span::styled(r.pg.mapping.label(), style)]
                },
            },
            ProcColumn::Used => Spec {
                title: "USED",
                width: fixed(0, 9, Right),
                shown: |_, _| true,
                sort: Some(SortKey::Used),
                legend: Some(legend::USED),
                extra: None,
                cell: |r, _| {
                    let end = ending(r);
                    let style = used_style(end, r.theme);
                    vec![Span::styled(used_label(end, r.pg, r.now), style)]
                },
            },
            ProcColumn::Peak => Spec {
                title: "PEAK",
                width: fixed(1, 12, Right),
                shown: |w, sort| w >= WIDE && sort != Some(SortKey::Growth),
                sort: Some(SortKey::Peak),
                legend: Some(legend::PEAK),
                extra: None,
                // Under the PEAK title: the number alone (it was `pk 24.6 GiB`, a second label).
                cell: |r, _| vec![Span::styled(human(r.pg.peak.value), r.theme.peak())],
            },
            ProcColumn::Growth => Spec {
                title: "GROWTH",
                width: fixed(1, 12, Right),
                shown: |w, sort| w >= WIDE && sort == Some(SortKey::Growth),
                sort: Some(SortKey::Growth),
                legend: Some(legend::PER_MIN),
                extra: None,
                cell: |r, _| {
                    let rate = r
                        .state
                        .and_then(|s| crate::tui::selection::growth(s, r.p.info.pid, r.pg.gpu));
                    vec![Span::styled(growth_label(rate, r.theme), r.theme.peak())]
                },
            },
            ProcColumn::Sm => Spec {
                title: "SM%",
                width: fixed(1, 4, Right),
                shown: |_, _| true,
                sort: None,
                legend: Some(legend::SM),
                cell: |r, _| vec![known(r.pg.sm_util.map(|u| format!("{u}%")), r.theme)],
                extra: Some(Extra::Sm),
            },
            ProcColumn::Cpu => Spec {
                title: "CPU%",
                width: fixed(1, 5, Right),
                shown: |_, _| true,
                sort: None,
                legend: Some(legend::CPU),
                cell: |r, _| vec![known(r.p.cpu.map(cpu_label), r.theme)],
                extra: Some(Extra::Host),
            },
            ProcColumn::Rss => Spec {
                title: "RSS",
                width: fixed(1, 9, Right),
                shown: |_, _| true,
                sort: None,
                legend: Some(legend::RSS),
                cell: |r, _| vec![known(r.p.rss.map(human), r.theme)],
                extra: Some(Extra::Host),
            },
            ProcColumn::Time => Spec {
                title: "TIME",
                width: fixed(1, 8, Right),
                shown: |_, _| true,
                sort: None,
                legend: Some(legend::TIME),
                cell: |r, _| {
                    let end = r.p.exit.map_or(r.now, |e| e.at);
                    let ran = r.p.info.started.map(|s| run_time(end - s));
                    vec![known(ran, r.theme)]
                },
                extra: Some(Extra::Host),
            },
            ProcColumn::Container => Spec {
                title: "CONTAINER",
                width: fixed(1, CONTAINER_W, Left),
                shown: |_, _| true,
                sort: None,
                legend: Some(legend::CONTAINER),
                cell: |r, _| {
                    let c = container(r.p).map(|c| keep_end(&c, CONTAINER_W.into(), r.theme.ascii));
                    vec![known(c, r.theme)]
                },
                extra: Some(Extra::Container),
            },
        }
    }
}

const CONTAINER_W: u16 = 20;

/// `text` cut to `width` from its start (`…d-0/pytorch`): a container's own name ends it.
fn keep_end(text: &str, width: usize, ascii: bool) -> String {
    let n = text.chars().count();
    if n <= width {
        return text.to_string();
    }
    let (dots, keep) = if ascii {
        ("~", width - 1)
    } else {
        ("…", width - 1)
    };
    format!("{dots}{}", text.chars().skip(n - keep).collect::<String>())
}

/// A value, or `n/a` dimmed where it is not known.
fn known(v: Option<String>, theme: &Theme) -> Span<'static> {
    match v {
        Some(v) => Span::raw(v),
        None => Span::styled(legend::NA.sym, theme.dim()),
    }
}

/// `3.2%` below ten, `87%`, `1600%` (sixteen cores).
fn cpu_label(c: f32) -> String {
    if c < 9.95 {
        format!("{c:.1}%")
    } else {
        format!("{c:.0}%")
    }
}

/// How long a process has run, as `ps` and htop's TIME+ read: `4:05`, `1:02:03`, `3d04h`.
pub fn run_time(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    match s {
        ..3_600 => format!("{}:{:02}", s / 60, s % 60),
        ..360_000 => format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60),
        _ => format!("{}d{:02}h", s / 86_400, s / 3600 % 24),
    }
}

/// The container a process runs in: `pod/container`, a name, or the runtime's id cut to 12.
fn container(p: &ProcState) -> Option<String> {
    let k = p.info.kube.as_ref()?;
    match (&k.pod, &k.container, &k.container_id) {
        (Some(pod), Some(c), _) => Some(format!("{pod}/{c}")),
        (None, Some(c), _) | (Some(c), None, _) => Some(c.clone()),
        (None, None, Some(id)) => Some(id.chars().take(12).collect()),
        (None, None, None) => None,
    }
}

/// One column as laid out in a table: where its cells start (after the gap) and how wide.
#[derive(Debug, Clone, Copy)]
pub struct Placed {
    pub col: ProcColumn,
    pub x: u16,
    pub width: u16,
}

/// The columns a table `width` wide shows, sorted by `sort`, and where. The `Rest` column
/// keeps one blank cell after it, so a long command never touches the next column.
pub fn layout(width: u16, table: impl Into<Table>) -> Vec<Placed> {
    let t: Table = table.into();
    let cells = |s: &Spec| match s.width {
        Width::Fixed { gap, width, .. } => gap + width,
        Width::Rest { gap } => gap + 1,
    };
    let mut cols: Vec<(ProcColumn, Spec)> = ProcColumn::ALL
        .iter()
        .map(|&c| (c, c.spec()))
        .filter(|(_, s)| s.extra.is_none() && (s.shown)(width, t.sort))
        .collect();
    let mut taken: u16 = cols.iter().map(|(_, s)| cells(s)).sum();
    // The optional columns, in order, while the command keeps its room.
    let keep = match t.extra {
        ExtraColumns::Auto => Some(COMMAND_AUTO),
        ExtraColumns::On => Some(COMMAND_ON),
        ExtraColumns::Off => None,
    };
    if let Some(keep) = keep {
        for &c in ProcColumn::ALL {
            let s = c.spec();
            let Some(e) = s.extra else { continue };
            if t.extra == ExtraColumns::Auto && !t.has.any(e) {
                continue;
            }
            if width.saturating_sub(taken + cells(&s)) < keep {
                break;
            }
            taken += cells(&s);
            cols.push((c, s));
        }
    }
    let rest = width.saturating_sub(taken);
    let mut x = 0u16;
    let mut placed = Vec::with_capacity(cols.len());
    for (col, s) in cols {
        x = x.saturating_add(s.width.gap());
        let (w, after) = match s.width {
            Width::Fixed { width, .. } => (width, 0),
            Width::Rest { .. } => (rest, 1),
        };
        placed.push(Placed { col, x, width: w });
        x = x.saturating_add(w).saturating_add(after);
    }
    placed
}

/// `gap` spaces, then `pieces` together padded to `width` characters as the column aligns
/// them (never cut: a fixed column is wide enough for what it holds), onto `out`: as
/// `format!("{text:<width$}")` or `{text:>width$}` of the joined pieces, without making
/// the joined, padded and prefixed strings one after another.
fn push_padded<'a>(
    out: &mut String,
    gap: usize,
    pieces: impl Iterator<Item = &'a str> + Clone,
    width: usize,
    align: Align,
) {
    let chars: usize = pieces.clone().map(|p| p.chars().count()).sum();
    let fill = width.saturating_sub(chars);
    out.reserve(gap + fill + pieces.clone().map(str::len).sum::<usize>());
    let spaces = |out: &mut String, n: usize| out.extend(std::iter::repeat_n(' ', n));
    spaces(out, gap);
    if align == Align::Right {
        spaces(out, fill);
    }
    pieces.for_each(|p| out.push_str(p));
    if align == Align::Left {
        spaces(out, fill);
    }
}

/// One process row, `width` cells wide, the table sorted by `sort`.
pub fn row(ctx: &RowCtx, width: u16, table: impl Into<Table>) -> Line<'static> {
    let mut spans: Vec<Span<'static>> = Vec::new();
    for at in layout(width, table) {
        let s = at.col.spec();
        let mut cell = (s.cell)(ctx, usize::from(at.width));
        match s.width {
            Width::Fixed { gap, width, align } => {
                let style = cell.first().map_or_else(Style::default, |s| s.style);
                let pieces = cell.iter().map(|s| s.content.as_ref());
                let mut text = String::new();
                push_padded(&mut text, gap.into(), pieces, width.into(), align);
                spans.push(Span::styled(text, style));
            }
            Width::Rest { gap } => {
                spans.push(Span::raw(" ".repeat(gap.into())));
                spans.append(&mut cell);
                spans.push(Span::raw(" "));
            }
        }
    }
    Line::from(spans)
}

/// The title row's text over rows of the same `width` and `sort`: `title(spec)` words each
/// column's title (the sorted one carries its arrow); `rest_title(title, width)` may add to
/// the `Rest` column's (a filter, `+N more`), and what it returns is cut to the column.
pub fn header(
    width: u16,
    table: impl Into<Table>,
    title: impl Fn(&Spec) -> String,
    rest_title: impl Fn(String, usize) -> String,
) -> String {
    let mut out = String::new();
    for at in layout(width, table) {
        let s = at.col.spec();
        let t = title(&s);
        match s.width {
            Width::Fixed { gap, width, align } => {
                push_padded(
                    &mut out,
                    gap.into(),
                    std::iter::once(t.as_str()),
                    width.into(),
                    align,
                );
            }
            Width::Rest { gap } => {
                out.push_str(&" ".repeat(gap.into()));
                let w = usize::from(at.width);
                let t: String = rest_title(t, w).chars().take(w).collect();
                out.push_str(&format!("{t:<w$} "));
            }
        }
    }
    out
}

/// Where each sortable title of `header(width, sort, title, …)` is drawn: its key, the
/// column of its first cell and its length. A title cut short by a narrow table is left
/// out (there is nothing whole to click).
pub fn sort_titles(
    width: u16,
    table: impl Into<Table>,
    title: impl Fn(&Spec) -> String,
) -> Vec<(SortKey, u16, u16)> {
    layout(width, table)
        .into_iter()
        .filter_map(|at| {
            let s = at.col.spec();
            let key = s.sort?;
            let t = title(&s);
            let len = t.chars().count() as u16;
            if len > at.width {
                return None;
            }
            let x = match s.width {
                Width::Fixed {
                    align: Align::Right,
                    ..
                } => at.x + at.width - len,
                _ => at.x,
            };
            Some((key, x, len))
        })
        .collect()
}

/// The command line with paths shortened to their last component, so the part that tells
/// runs apart (`train_bert.py --lr 3e-4`) survives a narrow column. A control character
/// (the newlines of `python -c` source) parts words as a space does: the terminal would
/// drop it and run the words together. A `multiprocessing` child shows the program it runs
/// (its own command line is the bootstrap), and a rank of a distributed job its rank.
pub fn command(p: &ProcState) -> String {
    format!("{}{}", p.who.rank_prefix(), program_command(p))
}

/// `command` without the rank.
fn program_command(p: &ProcState) -> String {
    let own = p.info.cmdline.as_deref();
    let line = match (&p.who.program, own) {
        (Some(prog), _) if p.who.mp_child => Some(prog.clone()),
        // The program is not known (a recording without the process tree): say what it is.
        (None, Some(c)) if p.who.mp_child => {
            let interp = c.split_whitespace().next().unwrap_or("python");
            let how = if c.contains("forkserver") {
                "forkserver"
            } else {
                "spawn"
            };
            Some(format!("{interp} {how} child"))
        }
        _ => own.map(str::to_string),
    };
    match line {
        Some(c) => c
            .split(|ch: char| ch == ' ' || ch.is_control())
            .map(|arg| match arg.rsplit_once('/') {
                Some((_, base)) if !base.is_empty() && !arg.starts_with('-') => base,
                _ => arg,
            })
            .collect::<Vec<_>>()
            .join(" "),
        None => p
            .info
            .name
            .clone()
            .unwrap_or_else(|| "(not readable)".into()),
    }
}

fn command_cell(r: &RowCtx, width: usize) -> Vec<Span<'static>> {
    // When it ended, where the command column has room to spare for it.
    let ended = ending(r)
        .map(|e| format!(" ended {}", r.theme.clock(e.at)))
        .filter(|t| width >= 24 + t.chars().count());
    let cmd_w = width - ended.as_ref().map_or(0, |t| t.chars().count());
    // The rank stays whole; the command is shortened into what is left.
    let rank = r.p.who.rank_prefix();
    let rank_w = rank.chars().count();
    let cmd = if rank_w > 0 && cmd_w >= rank_w + 6 {
        let rest = super::text::fit_command(&program_command(r.p), cmd_w - rank_w, r.theme.ascii);
        format!("{rank}{rest}")
    } else {
        super::text::fit_command(&command(r.p), cmd_w, r.theme.ascii)
    };
    let mut spans = vec![Span::raw(format!("{cmd:<cmd_w$}"))];
    spans.extend(ended.map(|t| Span::styled(t, r.theme.dim())));
    spans
}

fn mapping_style(m: &Mapping, theme: &Theme) -> Style {
    match m {
        Mapping::Hidden => theme.error(),
        Mapping::Logical {
            uncertain: Some(_), ..
        } => theme.warn(),
        Mapping::Unknown => theme.dim(),
        Mapping::Logical { .. } => theme.normal(),
    }
}

/// How the row's process ended, or is ending (`State::ending`: an OOM reads `OOM` from
/// the moment NVML stops listing it, as its alert does).
fn ending(r: &RowCtx) -> Option<Exit> {
    r.state.map_or(r.p.exit, |s| s.ending(r.p))
}

/// `n/a` when NVML gave no number; `gone` when NVML no longer lists the process (for
/// a few seconds, or while its companion still talks); once it has ended, how: `exited`,
/// `OOM` or `killed` (the row stays, with its last state, `keep_exited` long).
fn used_label(end: Option<Exit>, pg: &ProcGpu, now: Ts) -> String {
    if let Some(e) = end {
        return e.cause.label().into();
    }
    match pg.last_used {
        Some(u) => human(u),
        None if pg.last_seen < now => legend::GONE.sym.into(),
        None => legend::NA.sym.into(),
    }
}

fn used_style(end: Option<Exit>, theme: &Theme) -> Style {
    match end.map(|e| e.cause) {
        None => theme.used(),
        Some(ExitCause::Oom) => theme.error(),
        Some(ExitCause::Killed) => theme.warn(),
        Some(ExitCause::Exited) => theme.dim(),
    }
}

/// `+1.20 GiB/m`: the GROWTH sort's rate (`model::growth_rate`), `–` while unknown.
pub fn growth_label(rate: Option<f64>, theme: &Theme) -> String {
    let Some(g) = rate else {
        return if theme.ascii {
            "-".into()
        } else {
            "–".into()
        };
    };
    let sign = if g < 0.0 { "-" } else { "+" };
    format!(
        "{sign}{}{}",
        human(g.abs().round() as u64),
        legend::PER_MIN.sym
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_column_is_gapped_and_padded_as_format_pads_its_pieces_joined() {
        let cells: [&[&str]; 5] = [
            &[],
            &["12.5 GiB"],
            &["cuda:", "0"],
            &["ïé", "→x"],
            &["much too long"],
        ];
        for cell in cells {
            for (gap, width, align) in [
                (0, 0, Align::Left),
                (1, 8, Align::Right),
                (2, 10, Align::Left),
                (3, 4, Align::Right),
            ] {
                let t = cell.concat();
                let padded = match align {
                    Align::Left => format!("{t:<width$}"),
                    Align::Right => format!("{t:>width$}"),
                };
                let mut got = String::from("x");
                push_padded(&mut got, gap, cell.iter().copied(), width, align);
                assert_eq!(
                    got,
                    format!("x{}{padded}", " ".repeat(gap)),
                    "{cell:?} {gap} {width} {align:?}"
                );
            }
        }
    }

    /// Every sort key is some column's, under the title the sort names; every column a
    /// sort key names has that key.
    #[test]
    fn every_sort_key_is_a_column_titled_as_the_sort_says() {
        let mut k = SortKey::Used;
        loop {
            let col = ProcColumn::ALL.iter().find(|c| c.spec().sort == Some(k));
            let col = col.unwrap_or_else(|| panic!("{k:?} sorts no column"));
            assert_eq!(col.spec().title, k.column(), "{col:?}");
            k = k.next();
            if k == SortKey::Used {
                break;
            }
        }
    }

    /// A column's legend entry is on help's legend page.
    #[test]
    fn every_legend_entry_of_a_column_is_in_the_legend() {
        for c in ProcColumn::ALL {
            if let Some(t) = c.spec().legend {
                assert!(legend::LEGEND.contains(&t), "{c:?}: {t:?} not in LEGEND");
            }
        }
    }

    /// The columns fill the table's width exactly, at every width the screens use and
    /// either last column, so the header and the rows end together.
    #[test]
    fn the_layout_fills_the_width() {
        for w in [30u16, 40, 49, 50, 80, 120, 200] {
            for sort in [None, Some(SortKey::Used), Some(SortKey::Growth)] {
                let l = layout(w, sort);
                let last = l.last().expect("columns");
                assert_eq!(last.x + last.width, w, "{w} {sort:?}");
                let shown: Vec<_> = l.iter().map(|p| p.col).collect();
                assert_eq!(shown.contains(&ProcColumn::User), w >= WIDE, "{w}");
            }
        }
    }

    /// Every place that lists the optional columns for a person names each of them: the `o`
    /// key's help line (and README's table made from it), the config template, and the docs
    /// on screens, keys and settings. A new column is otherwise easy to leave out of one.
    #[test]
    fn every_optional_column_is_named_where_the_columns_are_listed() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let read = |f: &str| std::fs::read_to_string(root.join(f)).expect(f);
        let help = crate::tui::keys::BINDINGS
            .iter()
            .find(|b| b.action == crate::tui::keys::Action::Columns)
            .map(|b| b.desc)
            .expect("the columns key");
        let places = [
            ("the o key's help", help.to_string()),
            ("the config template", crate::config::default_text()),
            ("docs/screens.md", read("docs/screens.md")),
            ("docs/interaction.md", read("docs/interaction.md")),
            ("docs/install.md", read("docs/install.md")),
        ];
        let optional = ProcColumn::ALL.iter().filter(|c| c.spec().extra.is_some());
        for c in optional {
            let title = c.spec().title;
            for (place, text) in &places {
                assert!(text.contains(title), "{place} does not name {title}");
            }
        }
    }

    /// The optional columns: `auto` shows those with data once the command keeps 48 cells,
    /// `on` all of them while it keeps 14, `off` none; rows and titles still fill the width.
    #[test]
    fn optional_columns_take_room_only_where_the_command_keeps_its_own() {
        let extras = |l: &[Placed]| -> Vec<ProcColumn> {
            l.iter()
                .map(|p| p.col)
                .filter(|c| c.spec().extra.is_some())
                .collect()
        };
        let command = |l: &[Placed]| {
            l.iter()
                .find(|p| p.col == ProcColumn::Command)
                .expect("command")
                .width
        };
        let has = Has {
            sm: true,
            host: true,
            container: false,
        };
        let t = |extra| Table {
            sort: Some(SortKey::Used),
            extra,
            has,
        };
        use ProcColumn::{Container, Cpu, Rss, Sm, Time};
        // The overview's table at 80 and 200 columns (the sparkline takes the rest).
        assert_eq!(extras(&layout(78, t(ExtraColumns::Auto))), vec![]);
        let wide = layout(137, t(ExtraColumns::Auto));
        assert_eq!(extras(&wide), vec![Sm, Cpu, Rss, Time], "no container data");
        assert!(command(&wide) >= COMMAND_AUTO);
        let on = layout(78, t(ExtraColumns::On));
        assert_eq!(extras(&on), vec![Sm, Cpu]);
        assert!(command(&on) >= COMMAND_ON);
        let all = layout(137, t(ExtraColumns::On));
        assert_eq!(
            extras(&all),
            vec![Sm, Cpu, Rss, Time, Container],
            "on: data or not"
        );
        assert_eq!(extras(&layout(200, t(ExtraColumns::Off))), vec![]);
        for w in [40u16, 78, 137, 200] {
            for e in [ExtraColumns::Auto, ExtraColumns::On] {
                let l = layout(w, t(e));
                let last = l.last().expect("columns");
                assert_eq!(last.x + last.width, w, "{w} {e:?}");
                let head = header(w, t(e), |s| s.title.to_string(), |t, _| t);
                assert_eq!(head.chars().count(), usize::from(w), "{w} {e:?}: {head}");
            }
        }
    }

    #[test]
    fn run_times_read_as_ps_writes_them() {
        assert_eq!(run_time(245_000), "4:05");
        assert_eq!(run_time(3_723_000), "1:02:03");
        assert_eq!(run_time(52 * 3_600_000 + 2_000), "52:00:02");
        assert_eq!(run_time(100 * 3_600_000), "4d04h");
        assert_eq!(
            keep_end("trainer-0/pytorch-main", 12, false),
            "…ytorch-main"
        );
        assert_eq!(cpu_label(3.26), "3.3%");
        assert_eq!(cpu_label(1600.2), "1600%");
    }

    /// A row ends where its title row ends, also when a cell holds wider-than-ASCII text
    /// (`–` for an unknown growth, a user name with accents): widths count cells, not bytes.
    #[test]
    fn rows_and_titles_end_together_whatever_the_text() {
        use crate::model::sample::ProcInfo;
        use crate::model::series::{Peak, Series};
        let p = ProcState::new(
            ProcInfo {
                pid: 42,
                user: Some("jérôme".into()),
                cmdline: Some("python3 train.py".into()),
                ..ProcInfo::default()
            },
            0,
        );
        let pg = ProcGpu {
            gpu: 0,
            kind: Default::default(),
            used: Series::default(),
            last_used: Some(1 << 30),
            peak: Peak::default(),
            last_seen: 0,
            mapping: Mapping::Unknown,
            sm_util: None,
        };
        let theme = Theme::default();
        let state = State::default();
        let ctx = RowCtx {
            p: &p,
            pg: &pg,
            now: 0,
            state: Some(&state),
            theme: &theme,
        };
        for w in [40u16, 80, 120] {
            for sort in [Some(SortKey::Used), Some(SortKey::Growth)] {
                let r = row(&ctx, w, sort);
                let cells: usize = r.spans.iter().map(|s| s.content.chars().count()).sum();
                let head = header(w, sort, |s| s.title.to_string(), |t, _| t);
                assert_eq!(cells, usize::from(w), "{w} {sort:?}: {r:?}");
                assert_eq!(head.chars().count(), usize::from(w), "{w} {sort:?}: {head}");
            }
        }
    }

    #[test]
    fn a_spawn_child_shows_its_program_and_rank() {
        use crate::model::job::Identity;
        use crate::model::sample::ProcInfo;
        let info = ProcInfo {
            pid: 961,
            cmdline: Some(
                "/usr/bin/python3 -c from multiprocessing.spawn import spawn_main; \
                 spawn_main(tracker_fd=5, pipe_handle=7) --multiprocessing-fork"
                    .into(),
            ),
            program: Some("/usr/bin/python3 /w/ddp_spawn.py --epochs 40".into()),
            rank: Some(1),
            ..ProcInfo::default()
        };
        let mut p = ProcState::new(info.clone(), 0);
        assert_eq!(command(&p), "[rank 1] python3 ddp_spawn.py --epochs 40");
        p.info.program = None;
        p.who = Identity::of(&p.info, None);
        assert_eq!(command(&p), "[rank 1] python3 spawn child");
    }

    #[test]
    fn a_newline_in_a_command_parts_words_like_a_space() {
        use crate::model::sample::ProcInfo;
        let p = ProcState::new(
            ProcInfo {
                pid: 7,
                cmdline: Some("python3 -c import os, time\nsys.path.insert(0, '/a/b')\tx".into()),
                ..ProcInfo::default()
            },
            0,
        );
        assert_eq!(
            command(&p),
            "python3 -c import os, time sys.path.insert(0, b') x"
        );
    }
}
