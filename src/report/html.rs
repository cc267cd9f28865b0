//! The page: one self-contained HTML file (inline CSS and SVG; no script, no font, no
//! request), readable in any browser and printable. Sections, top to bottom: the summary,
//! memory per GPU, memory per process, the allocator at the moments that matter, every
//! alert with its evidence, and what the sources said.

use std::fmt::Write;

use crate::fmt::human;
use crate::model::allocator::frag_index;
use crate::model::named::Framework;
use crate::model::time::{Ts, rfc3339};
use crate::report::alerts::AlertLine;
use crate::report::charts::{self, Drawn};
use crate::report::collect::{Moment, ProcRun, Run};
use crate::report::summary::{self, utc, when};
use crate::report::svg::{esc, histogram};

/// Allocator moments shown per process and device (the worst fragmentation and the first
/// OOMs); a run that OOMs in a loop says the rest in a count.
const MAX_MOMENTS: usize = 4;

const CSS: &str = include_str!("page.css");

pub fn page(run: &Run) -> String {
    let mut o = String::with_capacity(256 * 1024);
    let title = format!("gpumon report: {}", file_name(&run.file));
    let _ = write!(
        o,
        r#"<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:"><title>{}</title><style>{CSS}</style></head><body>"#,
        esc(&title)
    );
    header(&mut o, run, &title);
    summary_section(&mut o, run);
    gpu_section(&mut o, run);
    job_section(&mut o, run);
    proc_section(&mut o, run);
    allocator_section(&mut o, run);
    alerts_section(&mut o, run);
    notes_section(&mut o, run);
    let _ = write!(
        o,
        r#"<footer>Written by gpumon {} from a replay of <code>{}</code> through its own model and alert rules (the alerts are what <code>gpumon replay --headless --alerts-jsonl -</code> prints for this file). Times are UTC. docs/report.md explains every part of this page.</footer></body></html>"#,
        esc(env!("CARGO_PKG_VERSION")),
        esc(&run.file)
    );
    o
}

fn file_name(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

fn header(o: &mut String, run: &Run, title: &str) {
    let h = &run.header;
    let mut facts = vec![
        format!("started {}", rfc3339(run.start)),
        format!("ended {}", utc(run.end)),
        format!("sampled every {}", crate::fmt::interval(h.interval_ms)),
    ];
    if let Some(d) = &h.driver_version {
        facts.push(format!("driver {d}"));
    }
    if let Some(c) = &h.cuda_version {
        facts.push(format!("CUDA {c}"));
    }
    if !h.gpumon_version.is_empty() {
        facts.push(format!("recorded by gpumon {}", h.gpumon_version));
    }
    facts.push(format!("{} frames", run.frames));
    let _ = write!(
        o,
        r#"<header><h1>{}</h1><p class="overview">{}</p><p class="facts">{}</p></header>"#,
        esc(title),
        esc(&summary::overview(run)),
        esc(&facts.join(" · "))
    );
}

fn summary_section(o: &mut String, run: &Run) {
    o.push_str(r#"<section id="summary"><h2>Summary</h2>"#);
    let items = summary::items(run);
    if items.is_empty() {
        o.push_str(r#"<p class="allclear">No alert was raised in this recording.</p><ul>"#);
        for g in &run.gpus {
            if let Some((t, v)) = g.peak {
                let _ = write!(
                    o,
                    "<li>GPU {} peaked at {} of {} {}.</li>",
                    g.info.index,
                    esc(&human(v)),
                    esc(&human(g.total)),
                    esc(&when(run, t, None))
                );
            }
        }
        o.push_str("</ul>");
    } else {
        o.push_str(r#"<ol class="items">"#);
        for i in &items {
            let key = format!(
                "{}:{}:{}",
                serde_json::to_value(i.kind)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
                i.pid.map(|p| p.to_string()).unwrap_or_default(),
                i.gpu
            );
            let _ = write!(
                o,
                r#"<li class="{sev}" data-alert="{key}"><span class="badge {sev}">{sev} · {kind}</span> <strong>{head}</strong>"#,
                sev = i.severity.label(),
                kind = esc(i.kind.label()),
                key = esc(&key),
                head = esc(&i.headline)
            );
            if let Some(out) = &i.outcome {
                let _ = write!(o, " {}", esc(out));
            }
            if let Some(r) = &i.remedy {
                let _ = write!(o, r#"<div class="remedy"><b>Remedy:</b> {}</div>"#, esc(r));
            }
            // The message, without the remedy it ends with when that is shown above.
            let msg = match (&i.remedy, i.message.find("Remedy: ")) {
                (Some(_), Some(at)) => i.message[..at].trim_end(),
                _ => i.message.as_str(),
            };
            let _ = write!(o, r#"<div class="msg">{}</div></li>"#, esc(msg));
        }
        o.push_str("</ol>");
    }
    o.push_str("</section>");
}

fn legend(o: &mut String, d: &Drawn) {
    o.push_str(r#"<ul class="legend">"#);
    for (class, words) in &d.legend {
        let _ = write!(
            o,
            r#"<li><span class="sw {}"></span>{}</li>"#,
            esc(class),
            esc(words)
        );
    }
    o.push_str("</ul>");
}

fn gpu_section(o: &mut String, run: &Run) {
    o.push_str(r#"<section id="gpus"><h2>Memory per GPU</h2>"#);
    if run.gpus.is_empty() {
        o.push_str("<p>The recording has no GPU samples (NVML was not available).</p>");
    }
    for g in &run.gpus {
        let peak = g
            .peak
            .map(|(t, v)| format!(" · peak {} {}", human(v), when(run, t, None)))
            .unwrap_or_default();
        let _ = write!(
            o,
            r#"<div class="card"><h3>GPU {} · {} · {}{}</h3>"#,
            g.info.index,
            esc(&g.info.name),
            esc(&human(g.total)),
            esc(&peak)
        );
        let d = charts::gpu_chart(run, g);
        o.push_str(&d.svg);
        legend(o, &d);
        notes(o, &d);
        o.push_str("</div>");
    }
    o.push_str("</section>");
}

/// One card per distributed job: its ranks on one chart, the divergent rank marked.
fn job_section(o: &mut String, run: &Run) {
    if run.jobs.is_empty() {
        return;
    }
    o.push_str(r#"<section id="jobs"><h2>Distributed jobs</h2>"#);
    for (i, job) in run.jobs.iter().enumerate() {
        let ranks = match job.world_size {
            Some(w) => format!("{} of {w} ranks", job.members.len()),
            None => format!("{} ranks", job.members.len()),
        };
        let pids: Vec<String> = job
            .members
            .iter()
            .map(|m| match m.rank {
                Some(r) => format!("rank {r}: PID {}", m.pid),
                None => format!("PID {}", m.pid),
            })
            .collect();
        let _ = write!(
            o,
            r#"<div class="card"><h3>{} · {}</h3><p class="cmd">{}</p>"#,
            esc(&job.id),
            esc(&ranks),
            esc(&pids.join(" · "))
        );
        let d = charts::job_chart(run, job, i);
        o.push_str(&d.svg);
        legend(o, &d);
        notes(o, &d);
        o.push_str("</div>");
    }
    o.push_str("</section>");
}

fn proc_title(run: &Run, p: &ProcRun) -> String {
    let rank = run
        .who
        .get(&p.pid)
        .map(|w| w.rank_prefix())
        .unwrap_or_default();
    let mut parts = vec![format!("{rank}PID {}", p.pid)];
    parts.push(match (p.gpu, &p.mapping) {
        (Some(g), Some(m)) => format!("GPU {g} ({m} inside the process)"),
        (Some(g), None) => format!("GPU {g}"),
        (None, _) => format!(
            "cuda:{} (GPU not placed)",
            p.dev.as_ref().map_or(0, |d| d.dev)
        ),
    });
    if let Some(h) = run.companions.get(&p.pid).and_then(|c| c.hello.as_ref()) {
        let fw = match (&h.framework, &h.framework_version) {
            (Some(f), Some(v)) if *f != Framework::None => format!("{f} {v}"),
            (Some(f), None) if *f != Framework::None => f.to_string(),
            _ => h.role.to_string(),
        };
        parts.push(fw);
    }
    if let (Some(a), Some(b)) = (p.first_seen(), p.last_seen()) {
        // How it ended in the live view's word (`OOM`, `killed`, `exited`), from the model.
        let ended = match run.ends.get(&p.pid) {
            Some(e) => format!("{} at {}", e.cause.label(), utc(e.at)),
            None if b < run.end - 2 * run.header.interval_ms as i64 => {
                format!("gone after {}", utc(b))
            }
            None => "running at the end".into(),
        };
        parts.push(format!("from {} · {ended}", utc(a)));
    }
    parts.join(" · ")
}

fn proc_section(o: &mut String, run: &Run) {
    o.push_str(r#"<section id="processes"><h2>Memory per process</h2>"#);
    if run.procs.is_empty() {
        o.push_str("<p>No process was seen on the GPUs.</p>");
    }
    for (i, p) in run.procs.iter().enumerate() {
        let _ = write!(
            o,
            r#"<div class="card"><h3>{}</h3><p class="cmd"><code>{}</code></p>"#,
            esc(&proc_title(run, p)),
            esc(&charts::card_command(charts::program(run, p)))
        );
        let d = charts::proc_chart(run, p, i);
        o.push_str(&d.svg);
        legend(o, &d);
        notes(o, &d);
        o.push_str("</div>");
    }
    o.push_str("</section>");
}

fn allocator_section(o: &mut String, run: &Run) {
    let mut any = false;
    let mut body = String::new();
    for p in &run.procs {
        let Some(d) = &p.dev else { continue };
        let mut moments: Vec<(String, &Moment)> = vec![];
        if let Some(m) = &d.worst_frag {
            moments.push(("worst fragmentation".into(), m));
        }
        for m in d.ooms.iter().take(MAX_MOMENTS - 1) {
            moments.push(("just before the OOM".into(), m));
        }
        if moments.is_empty() {
            continue;
        }
        any = true;
        let comp = run.companions.get(&p.pid);
        let hello = comp.and_then(|c| c.hello.as_ref());
        let policy = hello.and_then(|h| {
            h.policy
                .clone()
                .filter(|s| !s.is_empty())
                .or_else(|| crate::tui::ui::policy::policy_words(h))
        });
        let cvd = hello.and_then(|h| h.cuda_visible_devices.clone());
        let gpu_name = p
            .gpu
            .and_then(|g| run.gpus.iter().find(|x| x.info.index == g))
            .map(|g| format!("{} {}", g.info.name, g.info.pci_bus_id))
            .unwrap_or_default();
        let mapping = format!(
            "CUDA_VISIBLE_DEVICES={} → cuda:{} is GPU {} ({})",
            cvd.as_deref().unwrap_or("(unset)"),
            d.dev,
            p.gpu.map_or("?".into(), |g| g.to_string()),
            gpu_name.trim()
        );
        let _ = write!(
            body,
            r#"<div class="card"><h3>PID {} on GPU {}</h3><p class="policy">Policy: {}</p><p class="mapping">{}</p><div class="moments">"#,
            p.pid,
            p.gpu.map_or("?".into(), |g| g.to_string()),
            esc(policy
                .as_deref()
                .unwrap_or("unknown (the companion did not say)")),
            esc(&mapping)
        );
        for (k, (why, m)) in moments.iter().enumerate() {
            moment(&mut body, run, p, why, m, k);
        }
        if d.ooms.len() > MAX_MOMENTS - 1 {
            let _ = write!(
                body,
                "<p>… and {} more OOMs (every one is in the alert list).</p>",
                d.ooms.len() - (MAX_MOMENTS - 1)
            );
        }
        body.push_str("</div></div>");
    }
    o.push_str(r#"<section id="allocator"><h2>The allocator at the moments that matter</h2>"#);
    if any {
        o.push_str(&body);
    } else {
        o.push_str("<p>No companion reported its allocator's free blocks or an OOM in this recording; run the program under <code>gpumon run -- CMD</code> to see inside its allocator.</p>");
    }
    o.push_str("</section>");
}

/// One reading of a moment's panel: what it is, when it was taken, its rows.
struct Reading {
    what: &'static str,
    t: Ts,
    rows: Vec<(&'static str, String)>,
}

/// `16:47:24.312 UTC`, and how long before the panel's moment when it is older: a panel
/// never sets a reading of one instant beside another's without saying so.
fn read_at(t: Ts, moment: Ts) -> String {
    let at = chrono::DateTime::<chrono::Utc>::from_timestamp_millis(t)
        .map(|d| d.format("%H:%M:%S%.3f UTC").to_string())
        .unwrap_or_default();
    let ago = moment - t;
    match ago {
        ..=0 => at,
        1..=999 => format!("{at}, {ago} ms before"),
        1_000..=59_999 => format!("{at}, {:.1} s before", ago as f64 / 1000.0),
        _ => format!("{at}, {} before", crate::fmt::duration(ago)),
    }
}

/// T, L and F of one reading, as rows.
fn holes(rows: &mut Vec<(&'static str, String)>, t: Option<u64>, l: Option<u64>) {
    if let Some(t) = t {
        rows.push(("T free in its cache", human(t)));
    }
    if let Some(l) = l {
        rows.push(("L largest hole", human(l)));
    }
    if let Some(f) = t.and_then(|t| frag_index(t, l)) {
        rows.push(("F = 1 − L/T", format!("{f:.2}")));
    }
}

/// The readings a moment holds, the moment's own first: the OOM event (what failed and
/// the holes then), the block map (its holes and blocks) and the allocator's sample.
fn readings(m: &Moment) -> Vec<Reading> {
    let mut out = vec![];
    if let Some(e) = &m.oom {
        let mut rows = vec![];
        if let Some(r) = e.requested {
            rows.push(("R requested", human(r)));
        }
        holes(&mut rows, e.free_total, e.largest_free);
        if let Some(c) = e.device_free {
            rows.push(("card free", human(c)));
        }
        if let Some(l) = e.limit {
            rows.push(("allocator limit", human(l)));
        }
        out.push(Reading {
            what: "at the OOM",
            t: m.t,
            rows,
        });
    }
    if let Some((ft, fr)) = &m.frag {
        let mut rows = vec![];
        holes(&mut rows, fr.free_total, fr.largest_free);
        if let Some(n) = fr.n_free_blocks {
            rows.push(("free blocks", n.to_string()));
        }
        if let Some(n) = fr.n_segments {
            rows.push(("segments", n.to_string()));
        }
        out.push(Reading {
            what: "block map",
            t: *ft,
            rows,
        });
    }
    let mut rows = vec![];
    if let Some(a) = m.allocated {
        rows.push(("allocated", human(a)));
    }
    if let Some(r) = m.reserved {
        rows.push(("reserved", human(r)));
    }
    if let Some(l) = m
        .limit
        .filter(|_| m.oom.as_ref().is_none_or(|e| e.limit.is_none()))
    {
        rows.push(("allocator limit", human(l)));
    }
    if !rows.is_empty() {
        out.push(Reading {
            what: "allocator sample",
            t: m.sample_t.unwrap_or(m.t),
            rows,
        });
    }
    out.retain(|r| !r.rows.is_empty());
    out
}

fn moment(o: &mut String, run: &Run, p: &ProcRun, why: &str, m: &Moment, k: usize) {
    let requested = m.oom.as_ref().and_then(|e| e.requested);
    let _ = write!(
        o,
        r#"<div class="moment"><h4>{} {}</h4><table class="kv">"#,
        esc(&capital(why)),
        esc(&when(run, m.t, None))
    );
    for r in readings(m) {
        let _ = write!(
            o,
            r#"<tr class="reading"><th colspan="2">{}, {}</th></tr>"#,
            r.what,
            esc(&read_at(r.t, m.t))
        );
        for (k, v) in &r.rows {
            let _ = write!(o, "<tr><th>{}</th><td>{}</td></tr>", esc(k), esc(v));
        }
    }
    o.push_str("</table>");
    let taken = m
        .frag
        .as_ref()
        .map(|(ft, _)| format!("free blocks of the block map, {}", read_at(*ft, m.t)));
    match m.hist() {
        Some(h) => {
            let id = format!("hist-{}-{}-{k}", p.pid, p.gpu.unwrap_or(0));
            let title = format!("PID {} free blocks, {why}", p.pid);
            if let Some(svg) = histogram(&id, h, requested, &title) {
                o.push_str(&svg);
            }
            if let Some(tk) = taken {
                let _ = write!(o, r#"<p class="note">{}</p>"#, esc(&tk));
            }
        }
        None => {
            let na = m
                .frag
                .as_ref()
                .and_then(|(_, f)| f.na.get("hist").cloned())
                .unwrap_or_else(|| "no free-block list was reported before this moment".into());
            let _ = write!(o, r#"<p class="note">No histogram: {}.</p>"#, esc(&na));
        }
    }
    o.push_str("</div>");
}

/// The words under a chart.
fn notes(o: &mut String, d: &Drawn) {
    for f in &d.notes {
        let _ = write!(o, r#"<p class="forecast">{}</p>"#, esc(f));
    }
}

fn capital(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
        .unwrap_or_default()
}

fn alerts_section(o: &mut String, run: &Run) {
    o.push_str(r#"<section id="alerts"><h2>Every alert, with its evidence</h2>"#);
    if run.alerts.is_empty() {
        o.push_str("<p>None.</p></section>");
        return;
    }
    o.push_str(r#"<table class="alerts"><thead><tr><th>time</th><th>change</th><th>severity</th><th>alert</th><th>PID</th><th>GPU</th><th>epoch</th><th>summary</th></tr></thead><tbody>"#);
    for a in &run.alerts {
        let _ = write!(
            o,
            r#"<tr class="{sev}"><td>{} <small>{}</small></td><td>{}</td><td>{sev}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>"#,
            esc(&utc(a.at)),
            esc(&crate::fmt::clock_pos(a.at - run.start, false)),
            a.change.label(),
            esc(a.kind.label()),
            a.pid.map(|p| p.to_string()).unwrap_or_default(),
            a.gpu,
            a.epoch.map(|e| e.to_string()).unwrap_or_default(),
            esc(&a.summary),
            sev = a.severity.label(),
        );
    }
    o.push_str("</tbody></table>");
    for (i, a) in run.alerts.iter().enumerate() {
        evidence(o, a, i);
    }
    o.push_str("</section>");
}

fn evidence(o: &mut String, a: &AlertLine, i: usize) {
    let e = &a.evidence;
    let _ = write!(
        o,
        r#"<details class="evidence" id="alert-{i}"><summary>{} {} · {}</summary><p>{}</p>"#,
        esc(&utc(a.at)),
        a.change.label(),
        esc(&a.summary),
        esc(&a.message)
    );
    let mut kv: Vec<(String, String)> = vec![(
        "basis".into(),
        serde_json::to_value(e.basis)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
    )];
    if let Some(s) = &e.series {
        kv.push(("series".into(), s.to_string()));
    }
    if let Some(s) = e.slope {
        let unit = e.unit.as_ref().map_or("step".into(), |u| u.to_string());
        kv.push((
            "slope".into(),
            format!("{} per {unit}", human(s.max(0.0) as u64)),
        ));
    }
    if let Some(p) = e.p_value {
        kv.push(("p-value".into(), format!("{p:.2e}")));
    }
    if let Some(f) = &e.forecast {
        kv.push((
            "forecast".into(),
            format!(
                "{} now, +{} per step, {:.1} steps to the ceiling of {} ({}){}{}",
                human(f.current),
                human(f.rate.max(0.0) as u64),
                f.steps,
                human(f.ceiling),
                f.ceiling_source,
                f.ms.map(|ms| format!(", {}", crate::fmt::rough_duration(ms)))
                    .unwrap_or_default(),
                f.at_epoch
                    .map(|x| format!(", at epoch {x:.0}"))
                    .unwrap_or_default()
            ),
        ));
    }
    for v in &e.values {
        kv.push((v.name.to_string(), human(v.bytes)));
    }
    if let Some(n) = e.count {
        kv.push(("count".into(), n.to_string()));
    }
    o.push_str(r#"<table class="kv">"#);
    for (k, v) in &kv {
        let _ = write!(o, "<tr><th>{}</th><td>{}</td></tr>", esc(k), esc(v));
    }
    o.push_str("</table>");
    if !e.gates.is_empty() {
        o.push_str(r#"<table class="gates"><tr><th>gate</th><th>value</th><th>threshold</th><th>passed</th></tr>"#);
        for g in &e.gates {
            let _ = write!(
                o,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&g.name.to_string()),
                num(g.value),
                num(g.threshold),
                if g.passed { "yes" } else { "no" }
            );
        }
        o.push_str("</table>");
    }
    if !e.points.is_empty() {
        o.push_str(r#"<p class="points">points: "#);
        let pts: Vec<String> = e
            .points
            .iter()
            .map(|p| format!("{} {}", p.x, human(p.bytes)))
            .collect();
        o.push_str(&esc(&pts.join(" · ")));
        o.push_str("</p>");
    }
    let _ = write!(
        o,
        r#"<p class="note">The line as <code>--alerts-jsonl</code> wrote it:</p><pre>{}</pre></details>"#,
        esc(&a.raw)
    );
}

fn num(v: f64) -> String {
    if v.abs() >= 1e5 {
        human(v.max(0.0) as u64)
    } else if v.abs() < 0.01 && v != 0.0 {
        format!("{v:.2e}")
    } else {
        format!("{v:.3}")
    }
}

fn notes_section(o: &mut String, run: &Run) {
    let left_out = run.dropped.lines();
    if run.notes.is_empty() && left_out.is_empty() {
        return;
    }
    o.push_str(r#"<section id="notes"><h2>What the sources said</h2><ul>"#);
    for (t, text) in &run.notes {
        let _ = write!(o, "<li>{} — {}</li>", esc(&utc(*t)), esc(text));
    }
    for line in &left_out {
        let _ = write!(o, "<li>This report: {}</li>", esc(line));
    }
    o.push_str("</ul></section>");
}
