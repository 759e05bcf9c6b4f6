//! The built-in steps, one file per step.

pub(crate) mod git_clear;
pub(crate) mod git_clone;
pub(crate) mod git_commit;
pub(crate) mod git_push;
pub(crate) mod git_tag;
pub(crate) mod github_push;
// pull requests
pub(crate) mod git_merge_pr;
pub(crate) mod git_open_pr;
pub(crate) mod git_wait_for_pr;
mod pr;
// render
pub(crate) mod copy;
pub(crate) mod delete;
pub(crate) mod file_write;
pub(crate) mod helm_template;
pub(crate) mod helm_update_chart;
pub(crate) mod json_update;
pub(crate) mod kustomize_build;
pub(crate) mod kustomize_set_image;
pub(crate) mod tar;
pub(crate) mod toml_update;
pub(crate) mod untar;
pub(crate) mod yaml_merge;
pub(crate) mod yaml_update;
// read values into outputs
pub(crate) mod compose_output;
pub(crate) mod json_parse;
pub(crate) mod toml_parse;
pub(crate) mod yaml_parse;
// control
pub(crate) mod fail;
// Dray's own resources (applied by the engine)
pub(crate) mod set_freight_alias;
pub(crate) mod set_metadata;
// gates and deploy
pub(crate) mod argocd_update;
pub(crate) mod argocd_wait;
pub(crate) mod http;
pub(crate) mod http_download;
// OCI registries
pub(crate) mod oci_download;
pub(crate) mod oci_push;
// helpers of the render steps (not steps)
mod archive;
mod files;
mod json_text;
pub(crate) mod key_path;
mod parsed_outputs;
mod tool;
pub(crate) mod typed;
pub(crate) mod yaml_doc;
