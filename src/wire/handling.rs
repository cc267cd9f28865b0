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

/// The rule of one message type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    pub class: Class,
    /// The alert rules are evaluated as soon as it is applied, not at the next tick's turn:
    /// it can change a verdict by itself (an epoch closes, an OOM, a new block map).
    pub evaluate_now: bool,
}

impl Message {
    /// This message's rule (the table, one row per type).
    pub fn rule(&self) -> Rule {
        use Class::{Control, Important, Periodic};
        let (class, evaluate_now) = match self {
            Message::Hello(_) => (Important, false),
            Message::Sample(_) => (Periodic, false),
            Message::Frag(_) => (Periodic, true),
            Message::Epoch(_) => (Important, true),
            Message::Marker(_) => (Important, false),
            Message::Event(_) => (Important, true),
            Message::History(_) => (Important, true),
            Message::Alloc(_) => (Periodic, false),
            Message::Bye(_) => (Control, false),
            Message::Error(_) => (Important, false),
            Message::Disconnected(_) => (Control, false),
            Message::Link(_) => (Periodic, false),
        };
        Rule {
            class,
            evaluate_now,
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
        let want: &[(&str, Class, bool)] = &[
            ("hello", Class::Important, false),
            ("sample", Class::Periodic, false),
            ("frag", Class::Periodic, true),
            ("epoch", Class::Important, true),
            ("marker", Class::Important, false),
            ("event", Class::Important, true),
            ("history", Class::Important, true),
            ("alloc", Class::Periodic, false),
            ("bye", Class::Control, false),
            ("error", Class::Important, false),
            ("disconnected", Class::Control, false),
            ("link", Class::Periodic, false),
        ];
        let all: Vec<&str> = PEER_TYPES.iter().chain(LOCAL_TYPES).copied().collect();
        assert_eq!(
            all,
            want.iter().map(|w| w.0).collect::<Vec<_>>(),
            "one row per type, in the protocol's order"
        );
        for (name, class, evaluate_now) in want {
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
                    evaluate_now: *evaluate_now
                },
                "{name}"
            );
        }
    }
}
