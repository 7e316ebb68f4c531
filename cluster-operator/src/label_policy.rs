//! The label policy (design N3, a fixed cluster label) at startup: the ValidatingAdmissionPolicy
//! that keeps the `infinispan.org/cluster` label of resource CRs, and its binding, applied by the
//! operator itself when its identity may (the OLM path: a bundle cannot carry admission policies,
//! so the CSV grants the operator `validatingadmissionpolicies` and `...bindings` create, and get
//! and patch of its own by name: [`crate::rbac::label_policy_rules`]). Without the permission (the Helm chart installs the policy itself, or an administrator
//! chose not to), the operator logs one clear warning and runs on: the policy only guards against a
//! user moving a CR to another cluster by relabelling it.

use common_crds::generate::label_policies;
use common_crds::labels::CLUSTER_OPERATOR_FIELD_MANAGER;
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};

/// What happened to the label policy at startup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Applied (created or already up to date).
    Applied,
    /// The operator may not apply it; the message says what to do.
    NotPermitted(String),
    /// The API server failed.
    Failed(String),
}

/// Applies the policies and their bindings (the label policy and the shared resources
/// operator's, [`label_policies`]); never fails the operator.
pub async fn ensure(client: &kube::Client) -> Outcome {
    let all = label_policies();
    let names: Vec<String> = all.iter().map(|(policy, _)| policy.name_any()).collect();
    let policy = names.join(", ");
    let params = PatchParams::apply(CLUSTER_OPERATOR_FIELD_MANAGER).force();
    let policies: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(client.clone());
    let applied = async {
        for (policy, binding) in &all {
            policies
                .patch(&policy.name_any(), &params, &Patch::Apply(policy))
                .await?;
            bindings
                .patch(&binding.name_any(), &params, &Patch::Apply(binding))
                .await?;
        }
        Ok::<(), kube::Error>(())
    };
    let outcome = match applied.await {
        Ok(()) => Outcome::Applied,
        Err(kube::Error::Api(status)) if status.code == 403 => Outcome::NotPermitted(format!(
            "the label policy {} is not applied by the operator (it may not: {}); install it with the Helm chart or `kubectl apply -f` of the chart's files/label-policy.yaml, or CRs can be moved between clusters by relabelling them",
            policy, status.message
        )),
        Err(error) => Outcome::Failed(format!(
            "applying the label policy {policy} failed: {error}"
        )),
    };
    match &outcome {
        Outcome::Applied => tracing::info!(%policy, "label policy applied"),
        Outcome::NotPermitted(message) | Outcome::Failed(message) => tracing::warn!("{message}"),
    }
    outcome
}
