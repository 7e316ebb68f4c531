//! The chaos driver's hands and eyes: issues one operation on either side (the Kubernetes API
//! as `kubectl` would, the server's REST API as any other client would), and observes one slot
//! (for the gates) or the whole world (for the check).

use std::collections::BTreeSet;

use common_crds::ResourceKind as Kind;
use common_crds::labels::{CLUSTER_LABEL, RESOURCES_FINALIZER};
use infinispan_rest::tasks::SCRIPT_CACHE;
use infinispan_rest::{ConfigDocument, ConfigFormat, CreateCacheOptions, Error as RestError};
use kube::api::PostParams;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

use super::check::{ObservedCr, World};
use super::model::{self, Slot, Version};
use super::oracle::Outcome;
use super::plan::{Action, CrView, Op, Reach, Side, SlotView};

/// Both sides of one cluster, as the driver reaches them.
#[derive(Clone)]
pub struct Sides {
    pub client: kube::Client,
    pub namespace: String,
    pub cluster: String,
    /// Straight to the server (not through the operator's fault proxy).
    pub rest: infinispan_rest::Client,
    /// The `status.lastSynced.epoch` values the CRs held when the driver restarted the server
    /// ([`Sides::server_run_ends`]): records of server runs that are over.
    pub past_runs: BTreeSet<String>,
}

impl std::fmt::Debug for Sides {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sides")
            .field("namespace", &self.namespace)
            .field("cluster", &self.cluster)
            .finish_non_exhaustive()
    }
}

fn resource(kind: Kind) -> ApiResource {
    match kind {
        Kind::Cache => ApiResource::erase::<common_crds::Cache>(&()),
        Kind::Template => ApiResource::erase::<common_crds::Template>(&()),
        Kind::Counter => ApiResource::erase::<common_crds::Counter>(&()),
        Kind::Schema => ApiResource::erase::<common_crds::Schema>(&()),
        Kind::Task => ApiResource::erase::<common_crds::Task>(&()),
    }
}

fn is_status(error: &kube::Error, code: u16) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == code)
}

impl Sides {
    pub fn api(&self, kind: Kind) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), &self.namespace, &resource(kind))
    }

    async fn get_cr(&self, kind: Kind, name: &str) -> anyhow::Result<Option<DynamicObject>> {
        Ok(self.api(kind).get_opt(name).await?)
    }

    /// One slot, as far as `reach` allows: its user CR and its mirror CR (not while the
    /// kube-apiserver is down: left out), the server object (not while the server is down).
    pub async fn view(&self, slot: Slot, reach: Reach) -> anyhow::Result<SlotView> {
        let (user, mirror) = if reach.allows(Side::Kube) {
            let user = self.get_cr(slot.kind, &slot.cr_name()).await?;
            let mirror = self
                .get_cr(slot.kind, &slot.mirror_name(&self.cluster))
                .await?;
            (user, mirror)
        } else {
            (None, None)
        };
        let server = if reach.allows(Side::Server) {
            self.server_version(slot).await?
        } else {
            None
        };
        Ok(SlotView {
            user: user.map(|cr| cr_view(slot.kind, &cr, &self.past_runs)),
            mirror: mirror.map(|cr| cr_view(slot.kind, &cr, &self.past_runs)),
            server,
        })
    }

    /// The server's object of `slot`: `None` when absent, else its version (if readable).
    pub async fn server_version(&self, slot: Slot) -> anyhow::Result<Option<Option<Version>>> {
        let name = slot.server_name();
        let rest = &self.rest;
        let found = match slot.kind {
            Kind::Cache => match rest.cache_config(&name, ConfigFormat::Json).await {
                Ok(doc) => Some(model::version_of_config(&doc.text)),
                Err(RestError::NotFound { .. }) => None,
                Err(error) => return Err(error.into()),
            },
            Kind::Template => rest
                .template_definition(&name)
                .await?
                .map(|doc| model::version_of_config_value(&doc)),
            Kind::Counter => match rest.counter_config(&name).await {
                Ok(config) => Some(model::version_of_counter(&config)),
                Err(RestError::NotFound { .. }) => None,
                Err(error) => return Err(error.into()),
            },
            Kind::Schema => match rest.schema(&name).await {
                Ok(text) => Some(model::version_of_schema(&text)),
                Err(RestError::NotFound { .. }) => None,
                Err(error) => return Err(error.into()),
            },
            Kind::Task => rest
                .cache_entry(SCRIPT_CACHE, &name)
                .await?
                .map(|text| model::version_of_script(&text)),
        };
        Ok(found)
    }

    /// Issues `op`, whose gates were checked on `view`.
    pub async fn execute(&self, op: &Op, view: &SlotView) -> anyhow::Result<Outcome> {
        match op.side {
            Side::Kube => self.execute_kube(op, view).await,
            Side::Server => self.execute_server(op).await,
        }
    }

    async fn execute_kube(&self, op: &Op, view: &SlotView) -> anyhow::Result<Outcome> {
        let slot = op.slot;
        let api = self.api(slot.kind);
        // The CR acted on: the user CR when there is one (it beats a mirror).
        let target = if view.user.is_some() {
            slot.cr_name()
        } else {
            slot.mirror_name(&self.cluster)
        };
        match (op.action, op.version()) {
            (Action::Create, Some(v)) => {
                let mut cr = DynamicObject::new(&slot.cr_name(), &resource(slot.kind));
                cr.metadata.labels =
                    Some([(CLUSTER_LABEL.to_string(), self.cluster.clone())].into());
                cr.data = json!({ "spec": model::cr_spec(slot, v) });
                match api.create(&PostParams::default(), &cr).await {
                    Ok(_) => Ok(Outcome::Applied),
                    Err(e) if is_status(&e, 409) => Ok(Outcome::Refused("CR exists".into())),
                    Err(e) => Err(e.into()),
                }
            }
            (Action::Edit, Some(v)) => {
                let patch = json!({ "spec": model::cr_spec(slot, v) });
                match api
                    .patch(&target, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    Ok(after) if after.metadata.deletion_timestamp.is_some() => {
                        Ok(Outcome::OnTerminating)
                    }
                    Ok(_) => Ok(Outcome::Applied),
                    Err(e) if is_status(&e, 404) => Ok(Outcome::Refused(format!("no CR {target}"))),
                    Err(e) => Err(e.into()),
                }
            }
            (Action::Delete, _) => match api.delete(&target, &DeleteParams::default()).await {
                Ok(_) => Ok(Outcome::Applied),
                Err(e) if is_status(&e, 404) => Ok(Outcome::Refused(format!("no CR {target}"))),
                Err(e) => Err(e.into()),
            },
            (_, None) => anyhow::bail!("{op}: no version"),
        }
    }

    async fn execute_server(&self, op: &Op) -> anyhow::Result<Outcome> {
        let slot = op.slot;
        let name = slot.server_name();
        let rest = &self.rest;
        let result: Result<(), RestError> = match (op.action, op.version()) {
            (Action::Create, Some(v)) => match slot.kind {
                Kind::Cache => {
                    rest.create_cache(
                        &name,
                        &ConfigDocument::json(model::config_document(v)),
                        CreateCacheOptions::default(),
                    )
                    .await
                }
                Kind::Template => {
                    rest.create_template(&name, &ConfigDocument::json(model::config_document(v)))
                        .await
                }
                Kind::Counter => rest.create_counter(&name, &model::counter_config(v)).await,
                Kind::Schema => rest
                    .create_schema(&name, &model::schema_text(slot, v))
                    .await
                    .map(drop),
                Kind::Task => {
                    // PUT creates or replaces: refuse an existing task like the others.
                    if rest.cache_entry(SCRIPT_CACHE, &name).await?.is_some() {
                        return Ok(Outcome::Refused("task exists".into()));
                    }
                    rest.put_task(&name, &model::task_script(v)).await
                }
            },
            (Action::Edit, Some(v)) => {
                // Schemas and tasks are replaced with an upsert: edit only what exists.
                if self.server_version(slot).await?.is_none() {
                    return Ok(Outcome::Refused("not on the server".into()));
                }
                match slot.kind {
                    Kind::Cache => {
                        rest.update_cache(&name, &ConfigDocument::json(model::config_document(v)))
                            .await
                    }
                    Kind::Schema => rest
                        .put_schema(&name, &model::schema_text(slot, v))
                        .await
                        .map(drop),
                    Kind::Task => rest.put_task(&name, &model::task_script(v)).await,
                    Kind::Template | Kind::Counter => {
                        anyhow::bail!("{op}: {} cannot be edited on the server", slot.kind)
                    }
                }
            }
            (Action::Delete, _) => match slot.kind {
                Kind::Cache => rest.delete_cache(&name).await,
                Kind::Template => rest.remove_template(&name).await,
                Kind::Counter => rest.delete_counter(&name).await,
                Kind::Schema => rest.delete_schema(&name).await,
                Kind::Task => {
                    if rest.cache_entry(SCRIPT_CACHE, &name).await?.is_none() {
                        return Ok(Outcome::Refused("no task".into()));
                    }
                    rest.delete_task(&name).await
                }
            },
            (_, None) => anyhow::bail!("{op}: no version"),
        };
        match result {
            Ok(()) => Ok(Outcome::Applied),
            Err(RestError::NotFound { what }) => Ok(Outcome::Refused(format!("{what} not found"))),
            Err(RestError::AlreadyExists { what }) => {
                Ok(Outcome::Refused(format!("{what} already exists")))
            }
            Err(error) => Err(anyhow::Error::new(error).context(format!("{op} on {slot}"))),
        }
    }

    /// The server is about to restart: the epochs the CRs' records name now become records of
    /// a past server run (the run after the restart has another session). Returns how many
    /// epochs were new to the set.
    pub async fn server_run_ends(&mut self) -> anyhow::Result<usize> {
        let before = self.past_runs.len();
        for kind in model::KINDS {
            for cr in self.api(kind).list(&ListParams::default()).await? {
                if let Some(epoch) =
                    status_field(&cr, "/status/lastSynced/epoch").and_then(Value::as_str)
                {
                    self.past_runs.insert(epoch.to_string());
                }
            }
        }
        Ok(self.past_runs.len() - before)
    }

    /// Every CR of the five kinds in the namespace and every non-internal server object.
    pub async fn world(&self) -> anyhow::Result<World> {
        let mut world = World::default();
        for kind in model::KINDS {
            for cr in self.api(kind).list(&ListParams::default()).await? {
                world.crs.push(observed(kind, &cr));
            }
        }
        let internal = infinispan_rest::InternalObjects::default();
        let rest = &self.rest;
        let mut put = |kind: Kind, name: String, v: Option<Version>| {
            if !internal.is_internal(&name) {
                world.server.insert((kind, name), v);
            }
        };
        for name in rest.list_caches().await? {
            if internal.is_internal(&name) {
                continue;
            }
            match rest.cache_config(&name, ConfigFormat::Json).await {
                Ok(doc) => put(Kind::Cache, name, model::version_of_config(&doc.text)),
                Err(RestError::NotFound { .. }) => {}
                Err(error) => return Err(error.into()),
            }
        }
        for template in rest.list_templates().await? {
            let doc = template
                .configuration
                .get(&template.name)
                .unwrap_or(&template.configuration);
            let v = model::version_of_config_value(doc);
            put(Kind::Template, template.name.clone(), v);
        }
        for name in rest.list_counters().await? {
            match rest.counter_config(&name).await {
                Ok(config) => put(Kind::Counter, name, model::version_of_counter(&config)),
                Err(RestError::NotFound { .. }) => {}
                Err(error) => return Err(error.into()),
            }
        }
        for schema in rest.list_schemas().await? {
            match rest.schema(&schema.name).await {
                Ok(text) => put(Kind::Schema, schema.name, model::version_of_schema(&text)),
                Err(RestError::NotFound { .. }) => {}
                Err(error) => return Err(error.into()),
            }
        }
        for (name, script) in rest.cache_entries(SCRIPT_CACHE).await? {
            if !name.starts_with("@@") {
                put(Kind::Task, name, model::version_of_script(&script));
            }
        }
        Ok(world)
    }
}

fn status_field<'a>(cr: &'a DynamicObject, path: &str) -> Option<&'a Value> {
    cr.data.pointer(path)
}

fn has_finalizer(cr: &DynamicObject) -> bool {
    cr.metadata
        .finalizers
        .as_deref()
        .unwrap_or_default()
        .iter()
        .any(|f| f == RESOURCES_FINALIZER)
}

fn cr_view(kind: Kind, cr: &DynamicObject, past_runs: &BTreeSet<String>) -> CrView {
    let generation = cr.metadata.generation;
    let last_synced = status_field(cr, "/status/lastSynced/generation").and_then(Value::as_i64);
    let epoch = status_field(cr, "/status/lastSynced/epoch").and_then(Value::as_str);
    CrView {
        deleting: cr.metadata.deletion_timestamp.is_some(),
        finalizer: has_finalizer(cr),
        ever_synced: status_field(cr, "/status/lastSynced").is_some(),
        synced_current: last_synced.is_some() && last_synced == generation,
        recorded_in_run: epoch.is_some_and(|epoch| !past_runs.contains(epoch)),
        version: cr
            .data
            .get("spec")
            .and_then(|s| model::version_of_spec(kind, s)),
    }
}

fn observed(kind: Kind, cr: &DynamicObject) -> ObservedCr {
    let name = cr.metadata.name.clone().unwrap_or_default();
    let spec_name = cr.data.pointer("/spec/name").and_then(Value::as_str);
    let current = status_field(cr, "/status/observedGeneration").and_then(Value::as_i64)
        == cr.metadata.generation;
    let ready = status_field(cr, "/status/conditions")
        .and_then(Value::as_array)
        .and_then(|conditions| {
            conditions
                .iter()
                .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))
        })
        .and_then(|c| c.get("reason").and_then(Value::as_str))
        .filter(|_| current)
        .map(str::to_string);
    ObservedCr {
        kind,
        server_name: common_crds::naming::server_name(kind, spec_name, &name),
        name,
        deleting: cr.metadata.deletion_timestamp.is_some(),
        finalizer: has_finalizer(cr),
        ready,
        version: cr
            .data
            .get("spec")
            .and_then(|s| model::version_of_spec(kind, s)),
    }
}
