//! The Kubernetes mode's composition: a `kube::Client` from a kubeconfig or the pod's
//! ServiceAccount ([`client`]), `dray controller` ([`controller`]: leader election, then the
//! same controllers as `dray serve` on the Kubernetes store), the Project namespaces it
//! keeps ([`projects`]) and its health endpoints ([`health`]).

pub mod client;
pub mod controller;
mod health;
mod leader;
mod projects;

pub use client::kube_client;
pub use controller::{ControllerOptions, run_controller};
