//! The controller runtime, shaped like kube-runtime so that the same reconcilers run over
//! the embedded store today and over the Kubernetes API in Kubernetes mode:
//!
//! ```text
//!  Store ──changed_objects_since──▶ reflector ──▶ Cache (per kind, typed)
//!    ▲                                  │ Event {kind, key, revision, op, before, after}
//!    │ writes (status, Promotions)      ▼
//!    └──────── reconcile(Arc<K>, ctx) ◀── Controller::for_kind::<K>()
//!                 → Action                 (own changes, watches mapping other kinds'
//!                                           changes to keys, triggers, requeue times)
//! ```
//!
//! - [`reflector`] lists every cached kind once and then follows the store's change feed,
//!   keeping the [`Cache`] current and announcing each write after the cache holds it;
//! - [`Controller`] keeps a keyed queue ([`scheduler`]) per controller: a write wakes only
//!   the objects it affects, each object reconciles alone, requeues keep the sooner time;
//! - a reconcile answers an [`Action`]: look again after a while, or when something
//!   changes; a failing one answers through its `error_policy`.
//!
//! The runtime decides nothing about Dray's resources: the reconcilers live with their
//! layer (discovery, pipeline, promotion, verification) and say in their module docs what
//! they read, what they write and when they requeue.

mod action;
mod cache;
mod controller;
pub mod instruments;
pub mod metrics;
pub mod reflector;
mod resource;
mod scheduler;

pub use action::Action;
pub use cache::{Cache, Kinds};
pub use controller::{Controller, Trigger, Triggers, trigger};
pub use reflector::{Changed, Event};
pub use resource::Resource;

#[cfg(test)]
mod tests;
