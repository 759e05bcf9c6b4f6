//! Warehouses' discovery: what is in the image registries ([`image`]) and the config
//! repositories ([`git`]), from which Freight is minted.

pub mod controller;
pub mod credentials;
pub mod criteria;
pub mod git;
pub mod image;
pub mod mint;
pub mod project_credentials;
pub mod webhook_match;
