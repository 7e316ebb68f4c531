//! The Infinispan operators' API (group `infinispan.org`): every CRD type, the label, annotation,
//! finalizer and field-manager names, the mapping of server names to CR names, condition
//! helpers, and the generation of the CRD and admission-policy YAML.
//!
//! A library: it enables no k8s-openapi version feature (the binaries choose one).
//!
//! - [`infinispan`]: `Infinispan` v1, a cluster (cluster operator).
//! - [`backup`], [`restore`]: `Backup` and `Restore` v2alpha1 (cluster operator).
//! - [`cache`], [`template`], [`counter`], [`schema`], [`task`]: the five resource kinds v2alpha1,
//!   kept in sync with the server by each cluster's resources operator; [`common`] holds what they
//!   share, [`kind`] the registry of them ([`ResourceKind`], every list of the kinds derives
//!   from it).
//! - [`sites`]: `spec.service.sites` of an `Infinispan` CR (cross-site replication).
//! - [`rbac`]: the ServiceAccount, Role and RoleBinding of one cluster's resources operator, and
//!   the name of its leader-election Lease; the shared resources operator's identity.
//! - [`shared`]: how the namespace's shared resources operator learns its member clusters.

pub mod backup;
pub mod batch;
pub mod cache;
pub mod common;
pub mod conditions;
pub mod counter;
pub mod generate;
pub mod infinispan;
pub mod kind;
pub mod labels;
pub mod naming;
pub mod rbac;
pub mod restore;
pub mod schema;
pub mod shared;
pub mod sites;
pub mod task;
pub mod template;

pub use backup::{Backup, BackupSpec, BackupStatus};
pub use batch::{Batch, BatchSpec, BatchStatus};
pub use cache::{Cache, CacheSpec};
pub use common::{ResourceSpecCommon, ResourceStatus, ServerResource};
pub use counter::{Counter, CounterSpec};
pub use infinispan::{Infinispan, InfinispanSpec, InfinispanStatus};
pub use kind::{KindInfo, ResourceKind};
pub use restore::{Restore, RestoreSpec, RestoreStatus};
pub use schema::{Schema, SchemaSpec};
pub use task::{Task, TaskSpec};
pub use template::{Template, TemplateSpec};
