//! The composition root: the one place that wires the layers together into a running
//! Dray — the store, the runtime's caches, the controllers of every layer, and the HTTP
//! server. Nothing below imports it; the CLI's `serve` command calls it.

mod controllers;
mod serve;

pub use serve::{ServeOptions, serve};
