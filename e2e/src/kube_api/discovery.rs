//! Discovery documents: `/version`, `/api`, `/apis` (aggregated `apidiscovery.k8s.io/v2`
//! when the Accept header asks for it, `APIVersions`/`APIGroupList` otherwise), `/api/v1`
//! and `/apis/{group}/{version}` (`APIResourceList`).
//!
//! It owns the shapes; the served types come from [`super::resources`].

use serde_json::{Value, json};

use super::resources::ResourceType;

/// The media type of aggregated discovery (v2).
pub(crate) const AGGREGATED_V2: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// Whether the Accept header asks for aggregated discovery v2.
pub(crate) fn wants_aggregated(accept: &str) -> bool {
    accept.split(',').any(|media| {
        let params: Vec<&str> = media.split(';').map(str::trim).collect();
        params.contains(&"g=apidiscovery.k8s.io")
            && params.contains(&"v=v2")
            && params.contains(&"as=APIGroupDiscoveryList")
    })
}

pub(crate) fn version() -> Value {
    json!({
        "major": "1",
        "minor": "32",
        "gitVersion": "v1.32.0",
        "gitCommit": "70d3cc986aa8221cd1dfb1121852688902d3bf53",
        "gitTreeState": "clean",
        "buildDate": "2024-12-11T17:58:21Z",
        "goVersion": "go1.23.3",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

/// The groups other than core, in first-seen order, each with its versions.
fn groups(types: &[ResourceType]) -> Vec<(String, Vec<String>)> {
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for ty in types.iter().filter(|ty| !ty.group.is_empty()) {
        match groups.iter_mut().find(|(name, _)| *name == ty.group) {
            Some((_, versions)) if !versions.contains(&ty.version) => {
                versions.push(ty.version.clone())
            }
            Some(_) => {}
            None => groups.push((ty.group.clone(), vec![ty.version.clone()])),
        }
    }
    groups
}

pub(crate) fn api_versions(server: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server}],
    })
}

pub(crate) fn api_group_list(types: &[ResourceType]) -> Value {
    let groups: Vec<Value> = groups(types)
        .into_iter()
        .map(|(name, versions)| {
            let list: Vec<Value> = versions
                .iter()
                .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
                .collect();
            json!({"name": name, "versions": list, "preferredVersion": list[0]})
        })
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

fn scope(ty: &ResourceType) -> &'static str {
    if ty.namespaced {
        "Namespaced"
    } else {
        "Cluster"
    }
}

/// `APIResourceList` for one group/version, or `None` when it is not served.
pub(crate) fn resource_list(types: &[ResourceType], group: &str, version: &str) -> Option<Value> {
    let chosen: Vec<&ResourceType> = types
        .iter()
        .filter(|ty| ty.group == group && ty.version == version)
        .collect();
    if chosen.is_empty() {
        return None;
    }
    let mut resources = Vec::new();
    for ty in &chosen {
        let mut entry = json!({
            "name": ty.plural,
            "singularName": ty.singular,
            "namespaced": ty.namespaced,
            "kind": ty.kind,
            "verbs": ty.verbs(),
        });
        if !ty.short_names.is_empty() {
            entry["shortNames"] = json!(ty.short_names);
        }
        if !ty.categories.is_empty() {
            entry["categories"] = json!(ty.categories);
        }
        if !ty.custom {
            entry["storageVersionHash"] = json!("dray0000000=");
        }
        resources.push(entry);
        if ty.status_subresource {
            resources.push(json!({
                "name": format!("{}/status", ty.plural),
                "singularName": "",
                "namespaced": ty.namespaced,
                "kind": ty.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
    }
    let group_version = if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }))
}

fn discovery_resource(ty: &ResourceType) -> Value {
    let kind = json!({"group": ty.group, "version": ty.version, "kind": ty.kind});
    let mut entry = json!({
        "resource": ty.plural,
        "responseKind": kind,
        "scope": scope(ty),
        "singularResource": ty.singular,
        "verbs": ty.verbs(),
    });
    if !ty.short_names.is_empty() {
        entry["shortNames"] = json!(ty.short_names);
    }
    if !ty.categories.is_empty() {
        entry["categories"] = json!(ty.categories);
    }
    if ty.status_subresource {
        entry["subresources"] = json!([{
            "subresource": "status",
            "responseKind": kind,
            "verbs": ["get", "patch", "update"],
        }]);
    }
    entry
}

/// Aggregated discovery for `/api` (core only) or `/apis` (every other group).
pub(crate) fn aggregated(types: &[ResourceType], core: bool) -> Value {
    let items: Vec<Value> = if core {
        let resources: Vec<Value> = types
            .iter()
            .filter(|ty| ty.group.is_empty())
            .map(discovery_resource)
            .collect();
        vec![json!({
            "metadata": {"creationTimestamp": null},
            "versions": [{"version": "v1", "resources": resources, "freshness": "Current"}],
        })]
    } else {
        groups(types)
            .into_iter()
            .map(|(name, versions)| {
                let versions: Vec<Value> = versions
                    .iter()
                    .map(|version| {
                        let resources: Vec<Value> = types
                            .iter()
                            .filter(|ty| ty.group == name && ty.version == *version)
                            .map(discovery_resource)
                            .collect();
                        json!({"version": version, "resources": resources, "freshness": "Current"})
                    })
                    .collect();
                json!({"metadata": {"name": name, "creationTimestamp": null}, "versions": versions})
            })
            .collect()
    };
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    })
}
