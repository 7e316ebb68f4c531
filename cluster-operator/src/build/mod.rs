//! The desired Kubernetes objects of one `Infinispan` CR, built by pure functions (no I/O), so
//! that every builder is unit-tested and the controller only applies what they return with
//! server-side apply under one field manager. Why each object looks the way it does:
//! `docs/cluster-objects.md`.
//!
//! - [`server`]: the server's configuration (ConfigMap), Services, StatefulSet,
//!   PodDisruptionBudget.
//! - [`expose`]: `spec.expose`, a NodePort or LoadBalancer Service, or an Ingress.
//! - [`resources_operator`]: the per-cluster resources operator: ServiceAccount, Role,
//!   RoleBinding and Deployment.
//! - [`user_metadata`]: the labels and annotations a CR adds to the server pods, the Services
//!   and the exposing object (never to a selector).
//! - `identity` and `pod`: what both builders share: the CR's checked name and namespace, owner
//!   reference, labels and metadata; the restricted security contexts and other pod pieces.

pub mod expose;
mod identity;
pub(crate) mod pod;
pub mod resources_operator;
pub mod security;
pub mod server;
#[cfg(test)]
pub(crate) mod snapshot;
#[cfg(test)]
pub(crate) mod test_support;
pub mod user_metadata;

pub use identity::{MissingMetadata, PART_OF};
pub use pod::runtime_default;
