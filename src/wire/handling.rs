//! How gpumon treats each message type between the socket and the alert rules: one
//! exhaustive table, so a new type in `protocol.rs` does not compile until it has a row.
//! The channel's budget (`channel/conn.rs`), its queue (`channel/forward.rs`) and the
//! pipeline's alert evaluation (`pipeline/mod.rs`) all read their rule from here.

use super::messages::Message;

/// What kind of traffic a message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Sent again and again, the newest one says it all: when the loop's queue is full only
    /// the latest per (pid, device, type) is kept and older ones are dropped and counted;
    /// it never waits. Costs only the connection's message budget.
    Periodic,
    /// Rare and worth keeping (a handshake, an epoch, an OOM): waits a bounded time for room
    /// in the queue, and is counted against the connection's budget of important messages,
    /// so a peer flooding them is cut off there.
    Important,
    /// The connection's own course (bye, disconnected): waits like an important message
    /// but is never refused for budget, so the end of a connection is always seen.
    Control,
}

/// Which of a connection's budgets of important messages a message is counted against
/// (`channel::budget`). Each kind has its own: a program that marks every step at 20 a
/// second sheds markers, never its epochs or an OOM report (rare by nature, and what the
/// alerts are made of).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// Not budgeted one by one: periodic messages (message and byte budgets only) and the
    /// connection's own course.
    None,
    Hello,
    Epoch,
    Marker,
    Event,
    History,
    Error,
}

impl Lane {
    /// The lanes that have a budget, in a fixed order (`channel::budget` keeps one each).
    pub const BUDGETED: [Lane; 6] = [
        Lane::Hello,
        Lane::Epoch,
        Lane::Marker,
        Lane::Event,
        Lane::History,
        Lane::Error,
    ];
}

/// The rule of one message type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    pub class: Class,
    /// The alert rules are evaluated as soon as it is applied, not at the next tick's turn:
    /// it can change a verdict by itself (an epoch closes, an OOM, a new block map).
    pub evaluate_now: bool,
    /// The budget an important message is counted against.
    pub lane: Lane,
}

impl Message {
    /// This message's rule (the table, one row per type).
    pub fn rule(&self) -> Rule {
        use Class::{Control, Important, Periodic};
        let (class, evaluate_now, lane) = match self {
            Message::Hello(_) => (Important, false, Lane::Hello),
            Message::Sample(_) => (Periodic, false, Lane::None),
            Message::Frag(_) => (Periodic, true, Lane::None),
            Message::Epoch(_) => (Important, true, Lane::Epoch),
            Message::Marker(_) => (Important, false, Lane::Marker),
            Message::Event(_) => (Important, true, Lane::Event),
            Message::History(_) => (Important, true, Lane::History),
            Message::Alloc(_) => (Periodic, false, Lane::None),
            Message::Bye(_) => (Control, false, Lane::None),
            Message::Error(_) => (Important, false, Lane::Error),
            Message::Disconnected(_) => (Control, false, Lane::None),
            Message::Link(_) => (Periodic, false, Lane::None),
        };
        Rule {
            class,
            evaluate_now,
            lane,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{LOCAL_TYPES, PEER_TYPES};
    use super::*;

    /// The table as docs/protocol.md tells it, by wire name: every type of `protocol.rs`
    /// has its line here, so a new type is a decision, not a default.
    #[test]
    fn every_type_has_its_rule() {
        let want: &[(&str, Class, bool, Lane)] = &[
            ("hello", Class::Important, false, Lane::Hello),
            ("sample", Class::Periodic, false, Lane::None),
            ("frag", Class::Periodic, true, Lane::None),
            ("epoch", Class::Important, true, Lane::Epoch),
            ("marker", Class::Important, false, Lane::Marker),
            ("event", Class::Important, true, Lane::Event),
            ("history", Class::Important, true, Lane::History),
            ("alloc", Class::Periodic, false, Lane::None),
            ("bye", Class::Control, false, Lane::None),
            ("error", Class::Important, false, Lane::Error),
            ("disconnected", Class::Control, false, Lane::None),
            ("link", Class::Periodic, false, Lane::None),
        ];
        let all: Vec<&str> = PEER_TYPES.iter().chain(LOCAL_TYPES).copied().collect();
        assert_eq!(
            all,
            want.iter().map(|w| w.0).collect::<Vec<_>>(),
            "one row per type, in the protocol's order"
        );
        for (name, class, evaluate_now, lane) in want {
            // Fields unknown to a type are ignored: one line gives every type what it needs.
            let m: Message = serde_json::from_str(&format!(
                r#"{{"type":"{name}","reason":"","code":"","text":""}}"#
            ))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(m.type_name(), *name);
            assert_eq!(
                m.rule(),
                Rule {
                    class: *class,
                    evaluate_now: *evaluate_now,
                    lane: *lane,
                },
                "{name}"
            );
        }
    }
}
