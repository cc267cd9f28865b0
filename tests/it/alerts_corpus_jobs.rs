//! Distributed jobs recorded on one H200 (`tests/corpus_jobs`): four jobs at once — two
//! started by `torch.multiprocessing.spawn`, two by torchrun — whose ranks must be grouped
//! into their jobs, and whose divergent rank (rank 1 keeping 24 MiB per epoch; rank 0
//! keeping 12 MiB per epoch) must be named, while the clean job and the job whose rank 0
//! holds a constant extra 512 MiB stay silent. Ground truth is what each rank wrote itself
//! (`truth_jobs.jsonl`); labels and the tuning / held-out split in `labels_jobs.json`.
//!
//!     cargo test --test it alerts_corpus_jobs:: -- --nocapture

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use gpumon::model::alerts::AlertConfig;
use gpumon::model::frame::Frame;
use gpumon::record::{Next, Reader};
use serde_json::Value;

use crate::alerts_corpus2::Res;

/// Per half: jobs, clean jobs, false alarms, divergent ranks found / wanted, delays.
type Half = (u32, u32, u32, u32, u32, Vec<i64>);

/// A divergent-rank alert as raised: its PID, epoch and message.
struct Raised {
    pid: u32,
    epoch: Option<u64>,
    message: String,
}

#[test]
fn jobs_are_grouped_and_their_divergent_rank_named() -> Res<()> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus_jobs");
    let labels: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("labels_jobs.json"))?)?;
    let truth: Vec<Value> =
        std::fs::read_to_string(dir.join(labels["truth"].as_str().ok_or("truth")?))?
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
    let jobs = labels["jobs"].as_object().ok_or("jobs")?;
    let mut reader = Reader::open(&dir.join(labels["recording"].as_str().ok_or("rec")?))?;
    let (mut pipe, log) = crate::support::corpus::alert_pipeline(AlertConfig::default());
    let start = reader.header.started;
    pipe.apply(&Frame::Header(reader.header.clone()));
    let mut raised: Vec<Raised> = Vec::new();
    // The jobs the model formed, a minute in (every rank running): PID → (job, rank).
    let mut formed: Option<BTreeMap<u32, (String, Option<u32>)>> = None;
    while let Next::Frame(f) = reader.next()? {
        pipe.apply(&f);
        if formed.is_none() && pipe.state.now >= start + 60_000 {
            let mut m = BTreeMap::new();
            for j in pipe.state.jobs() {
                for r in &j.members {
                    m.insert(r.pid, (j.id.clone(), r.rank));
                }
            }
            formed = Some(m);
        }
        for line in log.take().split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            let v: Value = serde_json::from_slice(line)?;
            if v["change"] == "raised" && v["kind"] == "divergent_rank" {
                raised.push(Raised {
                    pid: v["pid"].as_u64().unwrap_or(0) as u32,
                    epoch: v["epoch"].as_u64(),
                    message: v["message"].as_str().unwrap_or_default().to_string(),
                });
            }
        }
    }
    let formed = formed.ok_or("the recording is shorter than a minute")?;
    let mut failures = Vec::new();
    let mut halves: BTreeMap<String, Half> = BTreeMap::new();
    for (name, job) in jobs {
        let pids: BTreeMap<u32, u32> = job["pids"]
            .as_object()
            .ok_or("pids")?
            .iter()
            .map(|(p, r)| (p.parse().unwrap_or(0), r.as_u64().unwrap_or(0) as u32))
            .collect();
        // Grouped: exactly these PIDs share one job, each with its rank.
        let ids: BTreeSet<Option<&String>> = pids
            .keys()
            .map(|p| formed.get(p).map(|(id, _)| id))
            .collect();
        let id = match ids.iter().next() {
            Some(Some(id)) if ids.len() == 1 => (*id).clone(),
            _ => {
                failures.push(format!("{name}: ranks not grouped into one job: {ids:?}"));
                continue;
            }
        };
        let members: BTreeSet<u32> = formed
            .iter()
            .filter(|(_, (j, _))| *j == id)
            .map(|(p, _)| *p)
            .collect();
        if members != pids.keys().copied().collect() {
            failures.push(format!("{name}: job {id} holds {members:?}"));
        }
        for (pid, rank) in &pids {
            if formed[pid].1 != Some(*rank) {
                failures.push(format!("{name}: PID {pid} has rank {:?}", formed[pid].1));
            }
        }
        let split = job["split"].as_str().unwrap_or("?").to_string();
        let h = halves.entry(split).or_default();
        h.0 += 1;
        let on_job: Vec<&Raised> = raised
            .iter()
            .filter(|r| pids.contains_key(&r.pid))
            .collect();
        let want = job["divergent"].as_u64().map(|p| p as u32);
        let wrong: Vec<&&Raised> = on_job.iter().filter(|r| Some(r.pid) != want).collect();
        if want.is_none() {
            h.1 += 1;
        }
        if !wrong.is_empty() {
            h.2 += 1;
            for r in wrong {
                failures.push(format!(
                    "{name}: false alarm on PID {}: {}",
                    r.pid, r.message
                ));
            }
        }
        let Some(want) = want else {
            println!("{name} ({id}): silent, as it should be");
            continue;
        };
        h.4 += 1;
        let onset = truth
            .iter()
            .filter(|t| t["pid"].as_u64() == Some(u64::from(want)))
            .filter(|t| t["kept_mib"].as_f64().is_some_and(|k| k > 0.0))
            .filter_map(|t| t["epoch"].as_i64())
            .min()
            .ok_or("no onset in the truth")?;
        let Some(r) = on_job.iter().find(|r| r.pid == want) else {
            failures.push(format!("{name}: rank PID {want} not named"));
            continue;
        };
        h.3 += 1;
        let delay = r.epoch.map_or(i64::MAX, |e| e as i64 - onset);
        h.5.push(delay);
        let rank = pids[&want];
        println!(
            "{name} ({id}): rank {rank} (PID {want}) named at epoch {:?}, {delay} epochs after its onset at {onset}: {}",
            r.epoch, r.message
        );
        if !r.message.starts_with(&format!("rank {rank} of ")) {
            failures.push(format!("{name}: the message does not name rank {rank}"));
        }
        if delay > job["detect_within_epochs"].as_i64().unwrap_or(6) {
            failures.push(format!("{name}: named {delay} epochs after the onset"));
        }
    }
    for (split, (n, clean, fa, found, want, delays)) in &halves {
        println!(
            "jobs corpus, {split}: {n} jobs, {clean} clean, {fa} false alarms; divergent rank found {found} of {want}, delays {delays:?} epochs"
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    Ok(())
}
