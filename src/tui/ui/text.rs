//! Fitting text into cells: command lines shortened in the middle so the script name and
//! the arguments that tell runs apart survive, and explanations wrapped instead of cut.

/// A legend line from pieces (a mark with its name, a labelled number) that fits `width`
/// cells: the leading pieces that fit whole, so a narrow pane loses the last pieces instead
/// of showing a number cut from its unit.
pub(crate) fn whole_pieces(
    pieces: Vec<Vec<ratatui::text::Span<'static>>>,
    width: u16,
) -> ratatui::text::Line<'static> {
    let mut left = usize::from(width);
    let mut out = Vec::new();
    for piece in pieces {
        let w: usize = piece.iter().map(ratatui::text::Span::width).sum();
        if w > left {
            break;
        }
        left -= w;
        out.extend(piece);
    }
    ratatui::text::Line::from(out)
}

/// `python3 -u train.py --lr 3e-4 --name run7` in `width` cells: whole if it fits; else
/// without the interpreter (every row says `python3`); else cut in the middle with `…`
/// (`..` in ASCII), three quarters kept from the start (script, first arguments) and a
/// quarter from the end (the last argument often names the run).
pub(crate) fn fit_command(cmd: &str, width: usize, ascii: bool) -> String {
    let len = cmd.chars().count();
    if len <= width {
        return cmd.to_string();
    }
    let cmd = strip_interpreter(cmd);
    if cmd.chars().count() <= width {
        return cmd.to_string();
    }
    let cmd = drop_timestamps(cmd);
    if cmd.chars().count() <= width {
        return cmd;
    }
    if let Some(short) = drop_trailing_options(&cmd, width, ascii) {
        return short;
    }
    if let Some(short) = first_option_only(&cmd, width, ascii) {
        return short;
    }
    let len = cmd.chars().count();
    let dots = if ascii { ".." } else { "…" };
    let d = dots.chars().count();
    if width <= d + 1 {
        return cmd.chars().take(width).collect();
    }
    // The script's name is what a person reads a row by: kept whole (without `.py` when
    // that is what fits) rather than a middle cut that leaves two characters of each end.
    let script = cmd.split(' ').next().unwrap_or("");
    let sn = script.chars().count();
    if cmd.contains(' ') && sn + d + 2 > width {
        if sn <= width {
            return script.to_string();
        }
        let bare = script.strip_suffix(".py").unwrap_or(script);
        if bare.chars().count() <= width {
            return bare.to_string();
        }
        return bare.chars().take(width - d).chain(dots.chars()).collect();
    }
    let keep = width - d;
    let tail = keep / 4;
    let head = if cmd.contains(' ') {
        (keep - tail).max((sn + 1).min(keep))
    } else {
        keep - tail
    };
    let tail = keep - head;
    if tail < 4 && cmd.contains(' ') {
        // Two or three characters after the `…` say nothing: whole words, then `…`.
        let mut out = String::new();
        for w in cmd.split(' ') {
            if out.chars().count() + w.chars().count() + 1 + d > width {
                break;
            }
            out.push_str(w);
            out.push(' ');
        }
        out.push_str(dots);
        return out;
    }
    let mut out: String = cmd.chars().take(head).collect();
    out.push_str(dots);
    out.extend(cmd.chars().skip(len - tail));
    out
}

/// Without options whose value is a Unix time (`--deadline 1795971387`): every run of a
/// batch differs there, so it crowds out the argument that names the run.
fn drop_timestamps(cmd: &str) -> String {
    let words: Vec<&str> = cmd.split(' ').collect();
    let is_time = |w: &str| w.len() >= 9 && w.bytes().all(|b| b.is_ascii_digit());
    let mut out: Vec<&str> = Vec::with_capacity(words.len());
    let mut i = 0;
    while i < words.len() {
        let w = words[i];
        if w.starts_with('-') && words.get(i + 1).is_some_and(|v| is_time(v)) {
            i += 2;
            continue;
        }
        if !is_time(w) {
            out.push(w);
        }
        i += 1;
    }
    out.join(" ")
}

/// Options are usually written most telling first (`--name run7 --seconds 157`): drop
/// `--option value` pairs from the end, keeping the first, until the line fits, with a
/// trailing `…` saying some were left out (when there is room for it).
fn drop_trailing_options(cmd: &str, width: usize, ascii: bool) -> Option<String> {
    let words: Vec<&str> = cmd.split(' ').collect();
    let first_opt = words.iter().position(|w| w.starts_with("--"))?;
    let mut end = words.len();
    while end > first_opt + 1 {
        // Step back over one option and its values.
        let start = (first_opt + 1..end)
            .rev()
            .find(|&i| words[i].starts_with("--"))?;
        end = start;
        let kept = words[..end].join(" ");
        let n = kept.chars().count();
        let dots = if ascii { " .." } else { " …" };
        if n + dots.chars().count() <= width {
            return Some(kept + dots);
        }
        if n <= width {
            return Some(kept);
        }
    }
    None
}

/// Narrower still: when the script takes no positional arguments, its first option
/// (`…--name demo_leak`, or just `…demo_leak`) says more than the script name every
/// row shares.
fn first_option_only(cmd: &str, width: usize, ascii: bool) -> Option<String> {
    let words: Vec<&str> = cmd.split(' ').collect();
    if words.len() < 3 || !words[1].starts_with("--") || words[2].starts_with('-') {
        return None;
    }
    let dots = if ascii { ".." } else { "…" };
    [
        format!("{dots}{} {}", words[1], words[2]),
        format!("{dots}{}", words[2]),
    ]
    .into_iter()
    .find(|s| s.chars().count() <= width)
}

/// Drop `python3`, `python3.12 -u`, `/usr/bin/env python` and similar launchers.
fn strip_interpreter(cmd: &str) -> &str {
    let mut rest = cmd.trim_start();
    loop {
        let (word, tail) = rest.split_once(' ').unwrap_or((rest, ""));
        let base = word.rsplit('/').next().unwrap_or(word);
        let launcher = base == "env"
            || base.starts_with("python")
            || base == "uv"
            || base == "torchrun"
            || (word.starts_with('-') && word.len() <= 3 && rest.len() != cmd.trim_start().len());
        if !launcher || tail.is_empty() {
            return rest;
        }
        rest = tail.trim_start();
    }
}

/// `line` in `width` cells, never cut inside a value: when it is too long, it ends after
/// the last whole piece that fits, with `…` (`>` in ASCII) saying more was there. A piece
/// is a word with the unit after it (`3.65 GiB`) and a short label before it (`L 63.0
/// MiB`, `T 8.79 GiB`), so neither a number nor its unit or label is left alone.
pub(crate) fn fit_words(
    line: ratatui::text::Line<'static>,
    width: usize,
    ascii: bool,
) -> ratatui::text::Line<'static> {
    if line.width() <= width {
        return line;
    }
    // Apart from the last value (`F 0.886 …`): `0.886…` would read as a longer number.
    let dots = if ascii { " >" } else { " …" };
    let keep = whole_pieces_in(&line, width.saturating_sub(2));
    let (mut head, _) = split_spans(line, keep);
    let dots = if keep == 0 { &dots[1..] } else { dots };
    head.spans.push(ratatui::text::Span::raw(dots.to_string()));
    head
}

/// `line` over as many lines as it needs of `width` cells, broken between pieces (see
/// `fit_words`), the continuation indented by two; a piece wider than a line is cut.
pub(crate) fn wrap_pieces(
    line: ratatui::text::Line<'static>,
    width: usize,
    ascii: bool,
) -> Vec<ratatui::text::Line<'static>> {
    let mut out = Vec::new();
    let mut rest = line;
    while rest.width() > width && out.len() < 8 {
        let room = if out.is_empty() {
            width
        } else {
            width.saturating_sub(2)
        };
        let keep = whole_pieces_in(&rest, room);
        if keep == 0 {
            break;
        }
        let (head, tail) = split_spans(rest, keep);
        out.push(head);
        let text: String = tail.spans.iter().map(|s| s.content.as_ref()).collect();
        let skip = text.chars().take_while(|c| c.is_whitespace()).count();
        let (_, tail) = split_spans(tail, skip);
        rest = tail;
        rest.spans.insert(0, ratatui::text::Span::raw("  "));
    }
    out.push(if out.is_empty() {
        rest
    } else {
        fit_words(rest, width, ascii)
    });
    out
}

/// Characters of `line` in the leading whole pieces that fit `width` cells.
fn whole_pieces_in(line: &ratatui::text::Line<'static>, width: usize) -> usize {
    let text: String = line.spans.iter().map(|s| s.content.as_ref()).collect();
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= width {
        return chars.len();
    }
    let mut words = Vec::new();
    let mut start = None;
    for (i, c) in chars.iter().enumerate() {
        match (c.is_whitespace(), start) {
            (false, None) => start = Some(i),
            (true, Some(s)) => {
                words.push((s, i));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        words.push((s, chars.len()));
    }
    let word = |k: usize| -> String { chars[words[k].0..words[k].1].iter().collect() };
    // A piece ends at a space that neither precedes a unit nor follows a label.
    let glued_to_next = |k: usize| {
        k + 1 < words.len()
            && (is_unit(&word(k + 1)) || is_label(&word(k)) || word(k).ends_with(['(', '=']))
    };
    let mut keep = 0;
    for (k, &(_, end)) in words.iter().enumerate() {
        if end > width {
            break;
        }
        if !glued_to_next(k) {
            keep = end;
        }
    }
    keep
}

/// `line` split after its first `at` characters, styles kept.
fn split_spans(
    line: ratatui::text::Line<'static>,
    at: usize,
) -> (ratatui::text::Line<'static>, ratatui::text::Line<'static>) {
    let (mut head, mut tail) = (Vec::new(), Vec::new());
    let mut left = at;
    for span in line.spans {
        let n = span.content.chars().count();
        if n <= left {
            left -= n;
            head.push(span);
        } else if left > 0 {
            let a: String = span.content.chars().take(left).collect();
            let b: String = span.content.chars().skip(left).collect();
            head.push(ratatui::text::Span::styled(a, span.style));
            tail.push(ratatui::text::Span::styled(b, span.style));
            left = 0;
        } else {
            tail.push(span);
        }
    }
    (
        ratatui::text::Line::from(head),
        ratatui::text::Line::from(tail),
    )
}

fn is_unit(w: &str) -> bool {
    let w = w.trim_end_matches([',', ')', ';', '.']);
    matches!(
        w,
        "B" | "KiB" | "MiB" | "GiB" | "TiB" | "%" | "s" | "ms" | "W" | "ep"
    )
}

/// A letter or two that names the number after it (`L`, `T`, `F`, `R`, `D`), or a word
/// that is nothing without it.
fn is_label(w: &str) -> bool {
    let w = w.trim_start_matches('(');
    (w.len() <= 2 && w.chars().all(|c| c.is_ascii_uppercase()))
        || matches!(
            w,
            "of" | "peak"
                | "used"
                | "alloc"
                | "cached"
                | "resv"
                | "stranded"
                | "asked"
                | "limit"
                | "card"
                | "allocator"
                | "other"
                | "reserved"
                | "requested"
                | "allocated"
                | "held"
                | "headroom"
                | "typical"
                | "hole"
                | "ceil"
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legend_pieces_are_kept_whole_or_dropped() {
        use ratatui::text::Span;
        let pieces = || {
            vec![
                vec![Span::raw("pid 7 ")],
                vec![Span::raw("━"), Span::raw(" used  ")],
                vec![Span::raw("card 140 GiB ")],
            ]
        };
        let text = |w| whole_pieces(pieces(), w).to_string();
        assert_eq!(text(40), "pid 7 ━ used  card 140 GiB ");
        assert_eq!(text(20), "pid 7 ━ used  ", "no number cut from its unit");
        assert_eq!(text(10), "pid 7 ", "a mark goes with its name");
    }

    #[test]
    fn values_are_never_cut_from_their_units_or_labels() {
        use ratatui::text::{Line, Span};
        let l = || {
            Line::from(vec![
                Span::raw("F 0.998 stranded "),
                Span::raw("3.65 GiB"),
                Span::raw("  L 56.0 MiB of T 3.71 GiB"),
            ])
        };
        let fit = |w| fit_words(l(), w, false).to_string();
        assert_eq!(fit(80), l().to_string());
        assert_eq!(fit(40), "F 0.998 stranded 3.65 GiB  L 56.0 MiB …");
        assert_eq!(fit(36), "F 0.998 stranded 3.65 GiB …");
        assert_eq!(fit(22), "F 0.998 …");
        for w in 0..45 {
            let s = fit(w);
            assert!(s.chars().count() <= w.max(1), "{w}: {s}");
            assert!(
                !s.ends_with("Gi…") && !s.ends_with("56.…") && !s.ends_with(" L…"),
                "{w}: {s}"
            );
        }
    }

    #[test]
    fn long_lines_wrap_between_whole_values() {
        use ratatui::text::Line;
        let l = Line::from("⚠ OOM x1 16:54:23 asked 64.0 MiB (T 8.79 GiB L 18.0 MiB)");
        let lines: Vec<String> = wrap_pieces(l, 40, false)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            lines,
            [
                "⚠ OOM x1 16:54:23 asked 64.0 MiB",
                "  (T 8.79 GiB L 18.0 MiB)"
            ],
            "{lines:?}"
        );
    }

    #[test]
    fn commands_keep_script_and_distinguishing_args() {
        let c = "python3 scenario.py --name leak_nvml_only --deadline 1795971387";
        assert_eq!(fit_command(c, 80, false), c);
        assert_eq!(
            fit_command(c, 56, false),
            "scenario.py --name leak_nvml_only --deadline 1795971387"
        );
        assert_eq!(
            fit_command(c, 34, false),
            "scenario.py --name leak_nvml_only"
        );
        assert_eq!(fit_command(c, 20, false), "…leak_nvml_only");
        // Positional arguments: the script name stays, the middle goes.
        let short = fit_command("python3 hold.py 3.0 30 cvd_unset --step 0.25", 16, false);
        assert_eq!(short.chars().count(), 16);
        assert!(short.starts_with("hold.py 3.0"), "{short}");
        assert_eq!(
            fit_command("python3 -u train.py --lr 3e-4", 20, true),
            "train.py --lr 3e-4"
        );
        assert_eq!(fit_command("abcdefghij", 6, true), "abc..j");
        let demo = "python3 scenario2.py --name demo_leak --seconds 157";
        assert_eq!(
            fit_command(demo, 31, false),
            "scenario2.py --name demo_leak …"
        );
        assert_eq!(
            fit_command(demo, 29, false),
            "scenario2.py --name demo_leak"
        );
        assert_eq!(fit_command(demo, 17, false), "…--name demo_leak");
        assert_eq!(fit_command(demo, 12, false), "…demo_leak");
        assert_eq!(fit_command("abcdefghij", 2, true), "ab");
        // A pane too narrow for the script and its arguments keeps the script's name.
        let grow = "python3 grow_shrink.py 70 2 24";
        assert_eq!(fit_command(grow, 11, false), "grow_shrink");
        assert_eq!(fit_command(grow, 14, false), "grow_shrink.py");
        assert_eq!(fit_command(grow, 8, false), "grow_sh…");
        assert_eq!(fit_command(grow, 18, false), "grow_shrink.py …");
        assert_eq!(fit_command(grow, 21, false), "grow_shrink.py … 2 24");
    }
}
