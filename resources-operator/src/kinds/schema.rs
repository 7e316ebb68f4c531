//! Schemas: the `Schema` CR and a Protobuf schema on the server.
//!
//! - The server object is the `.proto` text with the server's validation error, if any (the
//!   schema feed reads both from `___protobuf_metadata`).
//! - Server names end in `.proto` (`common_crds::naming`): a CR named `person` owns
//!   `person.proto`, so the schema's own event never makes a second (mirror) CR.
//! - Created and replaced in place (`PUT`), deleted. The server stores invalid schemas too: a
//!   schema equal to its CR but with errors is `Ready=False, reason=SchemaError` with the
//!   server's message, cleared when a fixed text is stored. The server refuses a replacement
//!   that is incompatible with the stored schema (`IPROTO000039`, e.g. a field's type changed,
//!   also from an unresolved one): `Rejected`, in its words.
//! - Equality is textual, line endings and trailing whitespace aside (the server keeps the text
//!   as given; a `.proto` has no canonical form the REST API offers).

use common_crds::Schema;
use common_crds::common::UpdateStrategy;
use common_crds::conditions::Reason;
use infinispan_rest::{Client, ConfigEvent, InternalObjects};
use serde_json::{Value, json};

use crate::engine::decision::{Comparison, Dependencies, KindCapabilities};
use crate::engine::digest::json_digest;
use crate::engine::kind::{Compared, KindAdapter, KindError, ServerChange, gone_is_deleted};

/// A schema as the server has it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchemaObject {
    pub proto: String,
    /// The server's validation error.
    pub error: Option<String>,
}

/// The schema adapter.
#[derive(Debug, Clone)]
pub struct SchemaAdapter {
    client: Client,
    internal: InternalObjects,
}

impl SchemaAdapter {
    pub fn new(client: Client, internal: InternalObjects) -> Self {
        Self { client, internal }
    }
}

/// The text without differences the schema's meaning ignores: line endings, trailing
/// whitespace of lines and of the text.
pub fn normalise(proto: &str) -> String {
    proto
        .lines()
        .map(str::trim_end)
        .collect::<Vec<_>>()
        .join("\n")
        .trim_end()
        .to_string()
}

impl KindAdapter for SchemaAdapter {
    type Cr = Schema;
    type Object = SchemaObject;

    fn capabilities(&self) -> KindCapabilities {
        KindCapabilities {
            update_in_place: true,
            create: true,
            delete: true,
        }
    }

    fn is_internal(&self, server_name: &str) -> bool {
        self.internal.is_internal(server_name)
    }

    fn change_of(&self, event: &ConfigEvent) -> Option<(String, ServerChange<SchemaObject>)> {
        match event {
            ConfigEvent::SchemaCreated {
                name,
                proto,
                errors,
            }
            | ConfigEvent::SchemaUpdated {
                name,
                proto,
                errors,
            } => Some((
                name.clone(),
                ServerChange::Present(SchemaObject {
                    proto: proto.clone(),
                    error: errors.clone(),
                }),
            )),
            ConfigEvent::SchemaRemoved { name } => Some((name.clone(), ServerChange::Removed)),
            _ => None,
        }
    }

    /// The error is part of it: a change of the error alone changes the CR's status.
    fn digest(&self, object: &SchemaObject) -> String {
        json_digest(&json!({ "proto": object.proto, "error": object.error }))
    }

    /// As the schema feed reads it (same text, same error: same digest), without a list.
    async fn read(&self, server_name: &str) -> Result<Option<SchemaObject>, KindError> {
        Ok(self
            .client
            .schema_with_error(server_name)
            .await?
            .map(|(proto, error)| SchemaObject { proto, error }))
    }

    async fn create(&self, server_name: &str, cr: &Schema) -> Result<(), KindError> {
        // PUT: a schema another client created meanwhile is replaced, as the CR wins here.
        self.client.put_schema(server_name, &cr.spec.schema).await?;
        Ok(())
    }

    async fn update(&self, server_name: &str, cr: &Schema) -> Result<(), KindError> {
        self.client.put_schema(server_name, &cr.spec.schema).await?;
        Ok(())
    }

    async fn delete(&self, server_name: &str) -> Result<(), KindError> {
        gone_is_deleted(self.client.delete_schema(server_name).await)
    }

    async fn compare(&self, cr: &Schema, object: &SchemaObject) -> Result<Compared, KindError> {
        let comparison = if normalise(&cr.spec.schema) == normalise(&object.proto) {
            Comparison::Equal
        } else {
            Comparison::Different { in_place: true }
        };
        Ok(Compared::local(comparison, Vec::new()))
    }

    async fn mirror_spec(
        &self,
        server_name: &str,
        object: &SchemaObject,
    ) -> Result<Value, KindError> {
        Ok(json!({ "name": server_name, "schema": object.proto }))
    }

    async fn spec_patch_from_server(
        &self,
        _cr: &Schema,
        object: &SchemaObject,
    ) -> Result<Value, KindError> {
        Ok(json!({ "schema": object.proto }))
    }

    fn update_strategy(&self, _cr: &Schema) -> UpdateStrategy {
        UpdateStrategy::Retain
    }

    fn dependencies(&self, _cr: &Schema) -> Dependencies {
        Dependencies::default()
    }

    /// The server keeps every one of its schemas across a restart that keeps its state
    /// (docs/server-api.md): an absence after such a restart is a removal (design R2, removals only
    /// when proven), whoever created it.
    fn persistent(&self, _cr: &Schema) -> bool {
        true
    }

    fn problem(&self, object: &SchemaObject) -> Option<(Reason, String)> {
        object.error.as_ref().map(|error| {
            (
                Reason::SchemaError,
                format!("the server found errors in the schema: {error}"),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_endings_and_trailing_blanks_do_not_count() {
        assert_eq!(
            normalise("message A {\r\n  optional string a = 1;  \r\n}\n\n"),
            normalise("message A {\n  optional string a = 1;\n}")
        );
        assert_ne!(normalise("message A {}"), normalise("message B {}"));
    }
}
