//! Integration: `operator_runtime::events::Recorder` against the real API server: an Event
//! repeated within the series window is one Event whose series counts the repeats, another note
//! is another Event, and a repeat of an Event deleted on the API server starts a new one.

use anyhow::ensure;
use e2e::{TestNamespace, Testbed};
use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference};
use k8s_openapi::api::events::v1::Event as K8sEvent;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::{Resource, ResourceExt};
use operator_runtime::events::{Event, EventType, Recorder, Reporter};

fn event(note: &str) -> Event {
    Event {
        type_: EventType::Warning,
        reason: "Refused".into(),
        note: Some(note.into()),
        action: "Sync".into(),
        secondary: None,
    }
}

#[tokio::test]
async fn repeats_become_a_series_and_other_notes_other_events() -> anyhow::Result<()> {
    let testbed = Testbed::get()?;
    let client = testbed.admin_client().await?;
    let ns = TestNamespace::create(&client, "events").await?;
    let result = async {
        // Any object will do as the Event's subject.
        let subject: ConfigMap = serde_json::from_value(serde_json::json!({
            "metadata": { "name": "subject" }
        }))?;
        let subject = Api::<ConfigMap>::namespaced(client.clone(), &ns.name)
            .create(&PostParams::default(), &subject)
            .await?;
        let regarding: ObjectReference = subject.object_ref(&());
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: "events-test".into(),
                instance: Some("events-test-0".into()),
            },
        );
        let events = Api::<K8sEvent>::namespaced(client.clone(), &ns.name);
        let listed = || async {
            let mut list = events.list(&ListParams::default()).await?.items;
            list.sort_by_key(|e| e.note.clone());
            anyhow::Ok(list)
        };

        for _ in 0..3 {
            recorder.publish(&event("the same"), &regarding).await?;
        }
        recorder.publish(&event("another"), &regarding).await?;
        let list = listed().await?;
        ensure!(list.len() == 2, "{list:#?}");
        let (another, same) = (&list[0], &list[1]);
        ensure!(same.note.as_deref() == Some("the same"));
        ensure!(
            same.series.as_ref().map(|s| s.count) == Some(3),
            "series of the repeated Event: {:?}",
            same.series
        );
        ensure!(another.series.is_none(), "{another:#?}");
        ensure!(same.type_.as_deref() == Some("Warning"));
        ensure!(same.reason.as_deref() == Some("Refused"));
        ensure!(same.reporting_controller.as_deref() == Some("events-test"));
        ensure!(same.reporting_instance.as_deref() == Some("events-test-0"));
        ensure!(same.regarding.as_ref().and_then(|r| r.uid.as_deref()) == subject.uid().as_deref());

        // The repeated Event deleted (expired) on the API server: the next repeat is new.
        events
            .delete(&same.name_any(), &DeleteParams::default())
            .await?;
        recorder.publish(&event("the same"), &regarding).await?;
        let list = listed().await?;
        ensure!(list.len() == 2, "{list:#?}");
        ensure!(list[1].name_any() != same.name_any() && list[1].series.is_none());
        anyhow::Ok(())
    }
    .await;
    ns.delete().await?;
    result
}
