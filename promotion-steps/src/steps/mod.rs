//! The built-in steps, one file per step.

pub(crate) mod git_clear;
pub(crate) mod git_clone;
pub(crate) mod git_commit;
pub(crate) mod git_push;
// pull requests
pub(crate) mod git_merge_pr;
pub(crate) mod git_open_pr;
pub(crate) mod git_wait_for_pr;
mod pr;
// render
pub(crate) mod copy;
pub(crate) mod delete;
pub(crate) mod helm_template;
pub(crate) mod helm_update_chart;
pub(crate) mod kustomize_build;
pub(crate) mod kustomize_set_image;
pub(crate) mod yaml_update;
// gates and deploy
pub(crate) mod argocd_update;
pub(crate) mod http;
// helpers of the render steps (not steps)
mod files;
mod tool;
pub(crate) mod typed;
pub(crate) mod yaml_doc;
