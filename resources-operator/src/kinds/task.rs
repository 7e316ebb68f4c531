//! Tasks: the `Task` CR and a script task on the server.
//!
//! - The server object is the script text (the task feed reads it from `___script_cache`,
//!   whose entry events are the only way to learn of server-side changes: the server has no
//!   task events).
//! - Created and replaced in place (`PUT /rest/v2/tasks/{name}`); deleted through the
//!   `___script_cache` entry (the REST API has no task delete). The script's first-line
//!   metadata comment (`// mode=local,language=javascript`) holds its options; a script the
//!   server cannot take (no engine for its language, a bad metadata line) is `Rejected` with
//!   the server's message.
//! - Only script tasks are objects here: Java tasks deployed in the server's jars are neither
//!   listed nor mirrored (they are not in `___script_cache` and cannot be created over REST).
//! - Equality is textual, line endings and trailing whitespace aside.

use common_crds::Task;
use common_crds::common::UpdateStrategy;
use infinispan_rest::{Client, ConfigEvent, InternalObjects};
use serde_json::{Value, json};

use crate::engine::decision::{Comparison, Dependencies, KindCapabilities};
use crate::engine::digest::text_digest;
use crate::engine::kind::{Compared, KindAdapter, KindError, ServerChange, gone_is_deleted};
use crate::kinds::schema::normalise;

/// The task adapter.
#[derive(Debug, Clone)]
pub struct TaskAdapter {
    client: Client,
    internal: InternalObjects,
}

impl TaskAdapter {
    pub fn new(client: Client, internal: InternalObjects) -> Self {
        Self { client, internal }
    }
}

impl KindAdapter for TaskAdapter {
    type Cr = Task;
    type Object = String;

    fn capabilities(&self) -> KindCapabilities {
        KindCapabilities {
            update_in_place: true,
            create: true,
            delete: true,
        }
    }

    fn is_internal(&self, server_name: &str) -> bool {
        self.internal.is_internal(server_name) || server_name.starts_with("@@")
    }

    fn change_of(&self, event: &ConfigEvent) -> Option<(String, ServerChange<String>)> {
        match event {
            ConfigEvent::TaskUpdated { name, script } => {
                Some((name.clone(), ServerChange::Present(script.clone())))
            }
            ConfigEvent::TaskRemoved { name } => Some((name.clone(), ServerChange::Removed)),
            _ => None,
        }
    }

    fn digest(&self, object: &String) -> String {
        text_digest(object)
    }

    async fn read(&self, server_name: &str) -> Result<Option<String>, KindError> {
        Ok(self
            .client
            .cache_entry(infinispan_rest::tasks::SCRIPT_CACHE, server_name)
            .await?)
    }

    async fn create(&self, server_name: &str, cr: &Task) -> Result<(), KindError> {
        Ok(self.client.put_task(server_name, &cr.spec.script).await?)
    }

    async fn update(&self, server_name: &str, cr: &Task) -> Result<(), KindError> {
        Ok(self.client.put_task(server_name, &cr.spec.script).await?)
    }

    async fn delete(&self, server_name: &str) -> Result<(), KindError> {
        gone_is_deleted(self.client.delete_task(server_name).await)
    }

    async fn compare(&self, cr: &Task, object: &String) -> Result<Compared, KindError> {
        let comparison = if normalise(&cr.spec.script) == normalise(object) {
            Comparison::Equal
        } else {
            Comparison::Different { in_place: true }
        };
        Ok(Compared::local(comparison, Vec::new()))
    }

    async fn mirror_spec(&self, server_name: &str, object: &String) -> Result<Value, KindError> {
        Ok(json!({ "name": server_name, "script": object }))
    }

    async fn spec_patch_from_server(
        &self,
        _cr: &Task,
        object: &String,
    ) -> Result<Value, KindError> {
        Ok(json!({ "script": object }))
    }

    fn update_strategy(&self, _cr: &Task) -> UpdateStrategy {
        UpdateStrategy::Retain
    }

    fn dependencies(&self, _cr: &Task) -> Dependencies {
        Dependencies::default()
    }

    /// The server keeps every one of its scripts across a restart that keeps its state
    /// (docs/server-api.md): an absence after such a restart is a removal (design R2, removals only
    /// when proven), whoever created it.
    fn persistent(&self, _cr: &Task) -> bool {
        true
    }
}
