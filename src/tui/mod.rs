//! The terminal front end: what a person sees and does. `app` holds the view's state and
//! turns input into commands, `ui` draws it (render functions only read), `output` takes the
//! drawn frame to the terminal's bytes, `keys` is the one key table, `event` the loop's
//! inputs, `term` the guard that always restores the terminal.

pub mod app;
pub mod event;
pub mod keys;
pub mod output;
pub mod selection;
pub mod signal;
pub(crate) mod term;
pub mod ui;
#[cfg(test)]
pub(crate) mod xorshift;
