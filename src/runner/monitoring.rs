//! `gpumon dashboard [WHICH] [--write DIR]`: the Grafana dashboard, the Prometheus scrape
//! example and the alerting rules (assets/), from the binary itself, so that an install from
//! a wheel or a crate has them too.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::cli::{DashboardArgs, MonitoringFile};
use crate::embed::MONITORING;

pub(super) fn command(args: &DashboardArgs) -> Result<i32> {
    let Some(dir) = &args.write else {
        return super::print_all(text(args.which).as_bytes());
    };
    let listed: String = write_all(dir)?
        .iter()
        .map(|p| format!("{}\n", p.display()))
        .collect();
    super::print_all(listed.as_bytes())
}

fn text(which: MonitoringFile) -> &'static str {
    let name = which.file_name();
    MONITORING
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, t)| *t)
        .unwrap_or_else(|| unreachable!("every MonitoringFile is embedded: {name}"))
}

/// Write every file into `dir`, replacing older copies, and return their paths.
fn write_all(dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut written = Vec::new();
    for (name, body) in MONITORING {
        let p = dir.join(name);
        std::fs::write(&p, body).with_context(|| format!("cannot write {}", p.display()))?;
        written.push(p);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ValueEnum;

    #[test]
    fn every_file_has_a_name_and_every_name_a_file() {
        let names: Vec<&str> = MonitoringFile::value_variants()
            .iter()
            .map(|w| w.file_name())
            .collect();
        let embedded: Vec<&str> = MONITORING.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, embedded);
    }
}
