//! What one round of Prometheus queries brings the loop.

use crate::model::fleet::Node;
use crate::model::frame::Frame;
use crate::model::time::Ts;

/// How the last round of queries went, for the status line.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueryStatus {
    /// Wall time of the round's queries.
    pub took_ms: u64,
    /// Bytes on the wire (compressed) and series read.
    pub wire_bytes: usize,
    pub series: usize,
    /// Why the fleet could not be read this round: unreachable, slow, refused.
    pub error: Option<String>,
    /// What Prometheus said was partial about its answer.
    pub warnings: Vec<String>,
}

/// A node Prometheus remembers, and when it was last scraped (Unix ms).
pub type Known = (String, Ts);

/// One round: the fleet (when it could be read) and the open node's new frames.
#[derive(Debug)]
pub struct FleetNews {
    /// Evaluation time of the queries, Unix ms.
    pub at: Ts,
    /// Every node in the answer, and (first round only) every node Prometheus remembers
    /// from the last hour with when it was last scraped.
    pub nodes: Option<(Vec<Node>, Vec<Known>)>,
    pub status: QueryStatus,
    pub open: Option<OpenNews>,
}

#[derive(Debug)]
pub struct OpenNews {
    pub node: String,
    /// The frames start a new model (the node was just opened): history first.
    pub reset: bool,
    pub frames: Vec<Frame>,
    pub error: Option<String>,
}
