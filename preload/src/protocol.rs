//! The companion protocol's version, line limit, histogram range and message type names:
//! the monitor's own definition (`src/wire/protocol.rs`) compiled in, so the interposer and
//! gpumon cannot disagree. The monitor's `wire::cross_language` tests check that this stays
//! the interposer's only source of them.

include!("../../src/wire/protocol.rs");
