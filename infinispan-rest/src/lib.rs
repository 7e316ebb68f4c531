//! Typed async client for the Infinispan server REST API and its config event stream.
//!
//! The one place of the project that knows the server's REST API, its versions and its quirks;
//! `docs/server-api.md` records what was checked against which server version.
//!
//! - Transport: hyper 1 directly (hyper-util's pooled client, hyper-rustls), HTTP/1.1, rustls
//!   with the `ring` provider only (the build's single provider, shared with kube; nothing pulls
//!   aws-lc-rs). hyper rather than reqwest because DIGEST needs a challenge round trip and the
//!   event stream needs its own timeouts (headers bounded, body unbounded, health probe).
//! - Auth: BASIC, DIGEST (MD5 / SHA-256) or learnt from the first challenge
//!   ([`AuthMethod::Auto`]); credentials are never put in URLs and are redacted in `Debug`.
//! - Names are percent-encoded as single path segments ([`names::encode`]).
//! - Errors: one enum, [`Error`], with [`Error::is_retryable`]; a TLS failure that a retry cannot
//!   fix (untrusted certificate, wrong name, no TLS on the port) is [`Error::Tls`], not retryable.
//!
//! One file per server resource: [`caches`], [`templates`], [`counters`], [`schemas`],
//! [`tasks`], [`backups`], [`server`]; the config event stream in [`events`].

pub mod auth;
pub mod backups;
pub mod caches;
mod capabilities;
mod client;
pub mod config;
pub mod counters;
pub mod error;
pub mod events;
mod kind;
pub mod names;
mod random;
pub mod schemas;
pub mod server;
pub mod sites;
pub mod tasks;
pub mod templates;
mod tls;

pub use auth::{AuthMethod, Credentials};
pub use backups::{BackupResources, JobStatus, backup_archive_path};
pub use caches::{Comparison, ConfigDocument, ConfigFormat, CreateCacheOptions, MutableAttribute};
pub use client::Client;
pub use config::{ClientConfig, ClientIdentity, TcpKeepalive};
pub use counters::{CounterConfig, CounterStorage};
pub use error::Error;
pub use events::documents::Documents;
pub use events::feeds::CreatedCounters;
pub use events::stream::{Backoff, ConfigEventStream, StreamItem, StreamOptions};
pub use events::{ConfigEvent, EventKind};
pub use names::InternalObjects;
pub use schemas::{SchemaError, SchemaStatus};
pub use server::{
    Capabilities, CapabilityOverride, ConfigNames, ContainerShutdown, HealthStatus, Version,
};
pub use tasks::TaskInfo;
pub use templates::Template;
