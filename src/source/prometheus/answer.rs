//! Prometheus's HTTP API answers (`/api/v1/query`, `/api/v1/query_range`) as plain series.

use std::collections::BTreeMap;

use serde::Deserialize;

/// One series: its labels (`__name__` among them) and its points, `(Unix ms, value)`,
/// oldest first. An instant query gives one point.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub labels: BTreeMap<String, String>,
    pub points: Vec<(i64, f64)>,
}

impl Series {
    pub fn name(&self) -> &str {
        self.label("__name__").unwrap_or("")
    }

    pub fn label(&self, k: &str) -> Option<&str> {
        self.labels.get(k).map(String::as_str)
    }

    pub fn num<T: std::str::FromStr>(&self, k: &str) -> Option<T> {
        self.label(k)?.parse().ok()
    }

    /// The distributed job a rank belongs to, as the node exported it. Prometheus gives
    /// the scraped series' own `job` the name `exported_job`, since its `job` is the scrape
    /// job's (unless `honor_labels: true`, when the exported one stays `job`: only a rank's
    /// `job` is then gpumon's).
    pub fn job(&self) -> Option<&str> {
        self.label("exported_job")
            .or_else(|| self.label("rank").and(self.label("job")))
    }

    /// The newest value.
    pub fn value(&self) -> Option<f64> {
        self.points.last().map(|p| p.1).filter(|v| v.is_finite())
    }
}

/// A successful answer, with what Prometheus said was incomplete about it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Data {
    pub series: Vec<Series>,
    pub warnings: Vec<String>,
}

#[derive(Deserialize)]
struct Envelope {
    status: String,
    #[serde(default)]
    data: Option<DataV>,
    #[serde(default, rename = "errorType")]
    error_type: Option<String>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    warnings: Vec<String>,
}

#[derive(Deserialize)]
struct DataV {
    #[serde(rename = "resultType")]
    result_type: String,
    // Read straight into series, not through a `serde_json::Value` tree: at 1,024 GPUs the
    // tree held the whole answer a second time (48 MB peak RSS). A scalar or string result
    // fails here; `parse` then reads the answer again without it to say what it was.
    #[serde(default)]
    result: Vec<SeriesV>,
}

#[derive(Deserialize)]
struct SeriesV {
    metric: BTreeMap<String, String>,
    #[serde(default)]
    value: Option<(f64, String)>,
    #[serde(default)]
    values: Vec<(f64, String)>,
}

fn point((t, v): (f64, String)) -> (i64, f64) {
    // Prometheus spells +Inf, -Inf and NaN as such; `parse` takes all three.
    ((t * 1000.0).round() as i64, v.parse().unwrap_or(f64::NAN))
}

/// Why an answer could not be read as series: an answer of another kind, or not one.
fn unreadable(body: &[u8], e: serde_json::Error) -> String {
    #[derive(Deserialize)]
    struct Kind {
        data: KindData,
    }
    #[derive(Deserialize)]
    struct KindData {
        #[serde(rename = "resultType")]
        result_type: String,
    }
    match serde_json::from_slice::<Kind>(body) {
        Ok(k) => format!(
            "expected series, Prometheus answered a {}",
            k.data.result_type
        ),
        Err(_) => {
            let head = String::from_utf8_lossy(&body[..body.len().min(80)]).into_owned();
            format!("not a Prometheus API answer ({e}): {head}")
        }
    }
}

/// Read an answer; an error answer or a body that is not one becomes a reason.
pub fn parse(body: &[u8]) -> Result<Data, String> {
    let env: Envelope = match serde_json::from_slice(body) {
        Ok(e) => e,
        Err(e) => return Err(unreadable(body, e)),
    };
    if env.status != "success" {
        return Err(format!(
            "Prometheus: {}{}",
            env.error_type.map(|t| format!("{t}: ")).unwrap_or_default(),
            env.error.unwrap_or_else(|| "error without a reason".into())
        ));
    }
    let data = env.data.ok_or("Prometheus answered success without data")?;
    let series = match data.result_type.as_str() {
        "vector" | "matrix" => data
            .result
            .into_iter()
            .map(|s| Series {
                labels: s.metric,
                points: s.value.into_iter().chain(s.values).map(point).collect(),
            })
            .collect(),
        // A scalar or string answer is not a set of series; the queries never ask for one.
        other => return Err(format!("expected series, Prometheus answered a {other}")),
    };
    Ok(Data {
        series,
        warnings: env.warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vector_answer_with_warnings() {
        let body = br#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"__name__":"gpumon_up","hostname":"n1"},"value":[1733000000.5,"1"]},
            {"metric":{"__name__":"gpumon_gpu_utilization_ratio","hostname":"n1","gpu":"0"},"value":[1733000000.5,"NaN"]}
        ]},"warnings":["partial response: store eu-1 unreachable"]}"#;
        let d = parse(body).expect("parses");
        assert_eq!(d.series.len(), 2);
        assert_eq!(d.series[0].name(), "gpumon_up");
        assert_eq!(d.series[0].points, [(1_733_000_000_500, 1.0)]);
        assert_eq!(d.series[1].value(), None, "NaN is no value");
        assert_eq!(d.series[1].num::<u32>("gpu"), Some(0));
        assert_eq!(d.warnings.len(), 1);
    }

    #[test]
    fn a_matrix_answer_keeps_every_point() {
        let body = br#"{"status":"success","data":{"resultType":"matrix","result":[
            {"metric":{"__name__":"x"},"values":[[1,"1"],[2,"2"],[3,"+Inf"]]}]}}"#;
        let d = parse(body).expect("parses");
        assert_eq!(d.series[0].points.len(), 3);
        assert_eq!(d.series[0].points[2].1, f64::INFINITY);
    }

    #[test]
    fn errors_say_what_prometheus_said() {
        let e = parse(br#"{"status":"error","errorType":"timeout","error":"query timed out in expression evaluation"}"#)
            .expect_err("an error");
        assert_eq!(
            e,
            "Prometheus: timeout: query timed out in expression evaluation"
        );
        let e = parse(b"<html>502 Bad Gateway</html>").expect_err("not JSON");
        assert!(e.contains("not a Prometheus API answer"), "{e}");
        let e = parse(br#"{"status":"success","data":{"resultType":"scalar","result":[1,"2"]}}"#)
            .expect_err("a scalar");
        assert!(e.contains("scalar"), "{e}");
    }
}
