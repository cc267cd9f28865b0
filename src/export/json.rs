//! `gpumon snapshot --json`: one sample of everything, as stable JSON for scripts.

use serde_json::{Value, json};

use crate::model::mapping::Mapping;
use crate::model::state::State;
use crate::model::time::rfc3339;

pub(crate) fn to_json(state: &State) -> Value {
    let h = state.header.as_ref();
    let gpus: Vec<Value> = state
        .gpus
        .iter()
        .map(|g| {
            let s = g.last.as_ref();
            let procs: Vec<Value> = state
                .procs_on(g.info.index)
                .into_iter()
                .map(|(p, pg)| {
                    let (logical, uncertain) = match &pg.mapping {
                        Mapping::Logical {
                            index, uncertain, ..
                        } => (json!(index), json!(uncertain)),
                        Mapping::Hidden => (json!("hidden"), Value::Null),
                        Mapping::Unknown => (Value::Null, Value::Null),
                    };
                    json!({
                        "pid": p.info.pid,
                        "user": p.info.user,
                        "name": p.info.name,
                        "process": p.who.label,
                        "rank": p.who.rank,
                        "cmdline": p.info.cmdline,
                        "kind": pg.kind,
                        "used_memory_bytes": pg.last_used,
                        "cuda_visible_devices": p.info.cuda_visible_devices,
                        "cuda_device_order": p.info.cuda_device_order,
                        "logical_index": logical,
                        "mapping_uncertain": uncertain,
                    })
                })
                .collect();
            json!({
                "index": g.info.index,
                "name": g.info.name,
                "uuid": g.info.uuid,
                "pci_bus_id": g.info.pci_bus_id,
                "memory": s.and_then(|s| s.mem).map(|m| json!({
                    "total_bytes": m.total, "used_bytes": m.used,
                    "free_bytes": m.free, "reserved_bytes": m.reserved,
                })),
                "utilization_percent": s.and_then(|s| s.util),
                "temperature_c": s.and_then(|s| s.temp_c),
                "power_w": s.and_then(|s| s.power_mw).map(|p| f64::from(p) / 1000.0),
                "error": g.error(),
                "processes": procs,
            })
        })
        .collect();
    json!({
        "time": rfc3339(state.now),
        "host": h.map(|h| h.host.clone()),
        "driver_version": h.and_then(|h| h.driver_version.clone()),
        "cuda_version": h.and_then(|h| h.cuda_version.clone()),
        "gpus": gpus,
    })
}
