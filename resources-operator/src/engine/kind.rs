//! The one trait a resource kind implements to be synced by the engine (design "Shape of the
//! code"): read/write/delete on the server, map to and from its CR, semantic equality, its
//! dependencies and what the server cannot do with it. Everything else (queues, the event
//! stream, claims, finalizers, status, Events, metrics) is the engine's.

use std::fmt::Debug;
use std::future::Future;

use common_crds::common::UpdateStrategy;
use common_crds::conditions::Reason;
use common_crds::{ResourceKind, ServerResource};
use infinispan_rest::{ConfigEvent, EventKind};
use kube::core::NamespaceResourceScope;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::decision::{Comparison, Dependencies, KindCapabilities};
use super::server_kind::event_kind;

/// What an event of the config stream says about one object of a kind.
#[derive(Clone, Debug, PartialEq)]
pub enum ServerChange<O> {
    /// Created or updated (or replayed): the object as the server has it now.
    Present(O),
    /// Removed on the server (a positive remove event).
    Removed,
}

/// Why an adapter call failed.
#[derive(Debug, thiserror::Error)]
pub enum KindError {
    /// The server refused or failed the call.
    #[error(transparent)]
    Server(#[from] infinispan_rest::Error),
    /// The CR cannot be turned into a server object (e.g. a malformed document): waits for a
    /// change of the CR.
    #[error("invalid {what}: {message}")]
    Invalid { what: String, message: String },
}

impl KindError {
    /// The same call may succeed later without any change (transport, timeouts, 5xx).
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Server(error) => error.is_retryable(),
            Self::Invalid { .. } => false,
        }
    }

    /// The message for the user (a status condition): the server's own words when it refused.
    pub fn user_message(&self) -> String {
        match self {
            Self::Server(infinispan_rest::Error::Rejected { lines, .. }) if !lines.is_empty() => {
                lines.join("\n")
            }
            Self::Server(error) => error.to_string(),
            Self::Invalid { .. } => self.to_string(),
        }
    }

    /// Stable, low-cardinality label (metrics).
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Server(error) => error.reason(),
            Self::Invalid { .. } => "Invalid",
        }
    }
}

/// A server deletion's result with "already gone" counted as deleted (what
/// [`KindAdapter::delete`] promises).
pub fn gone_is_deleted(result: Result<(), infinispan_rest::Error>) -> Result<(), KindError> {
    match result {
        Ok(()) | Err(infinispan_rest::Error::NotFound { .. }) => Ok(()),
        Err(error) => Err(error.into()),
    }
}

/// The [`KindAdapter::update`] of a kind the server cannot update in place: never called, as
/// its capabilities say so; an error if it ever were.
pub fn no_update_in_place(kind: &str, server_name: &str) -> KindError {
    KindError::Invalid {
        what: format!("{kind} '{server_name}'"),
        message: format!("the server cannot update a {kind} in place"),
    }
}

/// The result of comparing a CR with its server object: the decision's [`Comparison`] and, when
/// they differ, the server's explanation (e.g. `ISPN000961: Incompatible attribute ...`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Compared {
    pub comparison: Comparison,
    pub reasons: Vec<String>,
    /// Whether the server was asked. The engine memoises only those comparisons: one made
    /// locally costs less than the memory of an entry per CR.
    pub asked_server: bool,
}

impl Compared {
    /// A comparison made without the server.
    pub fn local(comparison: Comparison, reasons: Vec<String>) -> Self {
        Self {
            comparison,
            reasons,
            asked_server: false,
        }
    }

    /// A comparison the server made.
    pub fn by_server(comparison: Comparison, reasons: Vec<String>) -> Self {
        Self {
            comparison,
            reasons,
            asked_server: true,
        }
    }
}

/// One resource kind, as the engine needs it. The engine is generic over it; adding a kind is
/// one implementation of this trait.
pub trait KindAdapter: Send + Sync + 'static {
    /// The CR type.
    type Cr: ServerResource
        + kube::Resource<Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned
        + Send
        + Sync
        + 'static;

    /// The server object, normalised (as the event stream and a read give it).
    type Object: Clone + Debug + PartialEq + Send + Sync + 'static;

    /// The kind (its CR type's).
    const KIND: ResourceKind = <Self::Cr as ServerResource>::KIND;

    /// Which events of the config stream are about this kind.
    const EVENT_KIND: EventKind = event_kind(Self::KIND);

    /// What the server can do with this kind.
    fn capabilities(&self) -> KindCapabilities;

    /// Internal server objects (design E4): never mirrored, pushed or deleted.
    fn is_internal(&self, server_name: &str) -> bool;

    /// The object and change an event carries, for events of [`Self::EVENT_KIND`].
    fn change_of(&self, event: &ConfigEvent) -> Option<(String, ServerChange<Self::Object>)>;

    /// Digest of the normalised server object (recorded as `lastSynced.digest`).
    fn digest(&self, object: &Self::Object) -> String;

    /// Reads one object from the server; `None` when it does not exist.
    fn read(
        &self,
        server_name: &str,
    ) -> impl Future<Output = Result<Option<Self::Object>, KindError>> + Send;

    /// Creates the CR's object on the server.
    fn create(
        &self,
        server_name: &str,
        cr: &Self::Cr,
    ) -> impl Future<Output = Result<(), KindError>> + Send;

    /// Updates the server object to the CR's, in place.
    fn update(
        &self,
        server_name: &str,
        cr: &Self::Cr,
    ) -> impl Future<Output = Result<(), KindError>> + Send;

    /// Deletes the server object; already gone counts as deleted.
    fn delete(&self, server_name: &str) -> impl Future<Output = Result<(), KindError>> + Send;

    /// Semantic comparison of the CR's desired object with the server's (server defaults and
    /// document formats do not count, design L3).
    fn compare(
        &self,
        cr: &Self::Cr,
        object: &Self::Object,
    ) -> impl Future<Output = Result<Compared, KindError>> + Send;

    /// The spec of a mirror CR for a server object (design S1), as JSON.
    fn mirror_spec(
        &self,
        server_name: &str,
        object: &Self::Object,
    ) -> impl Future<Output = Result<serde_json::Value, KindError>> + Send;

    /// A JSON merge patch of the CR's spec that makes it stand for the server object, keeping
    /// the CR's own form where the kind has one (design S2: the document format).
    fn spec_patch_from_server(
        &self,
        cr: &Self::Cr,
        object: &Self::Object,
    ) -> impl Future<Output = Result<serde_json::Value, KindError>> + Send;

    /// `spec.updates.strategy` of the CR ([`UpdateStrategy::Retain`] for kinds without it).
    fn update_strategy(&self, cr: &Self::Cr) -> UpdateStrategy;

    /// What the CR's object needs or what uses it (design D1); found in the engine's stores.
    fn dependencies(&self, cr: &Self::Cr) -> Dependencies;

    /// Server objects the CR's object needs (design D1: a Cache's Template, its Schemas). Until
    /// the server has them, the CR waits with `DependencyMissing` and is reconciled again as
    /// soon as one appears. Default: nothing.
    fn needs(&self, _cr: &Self::Cr) -> Vec<super::catalog::Needed> {
        Vec::new()
    }

    /// The CR's server object survives a server restart that keeps the server's state (design
    /// R2: only then does its absence after a restart prove a removal). Default: objects the
    /// operator created from a user CR are persistent (the engine creates them so); a mirrored
    /// object may have been created volatile by another client, which the server does not tell.
    /// Kinds with a storage attribute (counters) say it exactly.
    fn persistent(&self, cr: &Self::Cr) -> bool {
        super::claims::origin(cr) == super::decision::Origin::Kubernetes
    }

    /// A server object equal to its CR that is still not usable (a schema the server stored
    /// with errors): the reason and the server's message, reported instead of `Synced`.
    /// Default: none.
    fn problem(&self, _object: &Self::Object) -> Option<(Reason, String)> {
        None
    }

    /// The digest ([`Self::digest`]) of the server object the CR's spec holds verbatim, when
    /// its spec is a server object as the server wrote it (a mirror, or a spec the operator
    /// rewrote from the server) and the kind can tell without the server. A CR holding the very
    /// object it was last synced with, unedited since, is known to differ from a server object
    /// whose digest moved: the engine skips the server's compare (design S2, server changes update
    /// the CR, for a CR that only follows the server). Default: never known.
    fn held_digest(&self, _cr: &Self::Cr) -> Option<String> {
        None
    }

    /// [`Self::compare`] without classifying a difference (whether the server could take the
    /// CR's object in place), when that costs the server less: the [`Comparison::Different`] it
    /// returns carries a placeholder that the engine never acts on; the engine asks for
    /// [`Self::compare`] when the decision depends on it (a push to the server). `None` (the
    /// default): the kind has no cheaper comparison.
    fn compare_unclassified(
        &self,
        _cr: &Self::Cr,
        _object: &Self::Object,
    ) -> impl Future<Output = Result<Option<Compared>, KindError>> + Send {
        std::future::ready(Ok(None))
    }
}
