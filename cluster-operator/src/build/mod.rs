//! The desired Kubernetes objects of one `Infinispan` CR, built by pure functions (no I/O), so
//! that every builder is unit-tested and the controller only applies what they return with
//! server-side apply under one field manager.
//!
//! - [`server`]: the server's configuration (ConfigMap), Services, StatefulSet,
//!   PodDisruptionBudget.
//! - [`resources_operator`]: the per-cluster resources operator: ServiceAccount, Role,
//!   RoleBinding and Deployment.

pub mod resources_operator;
pub mod server;
#[cfg(test)]
mod snapshot;
