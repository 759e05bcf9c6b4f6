//! The `openidconnect` types Dray's login uses: ID-token claims with every claim the
//! standard does not name kept ([`OtherClaims`], for `groups` and the like), and the client
//! shape discovery gives (authorization and token endpoints, no others).

use openidconnect::core::{
    CoreAuthDisplay, CoreAuthPrompt, CoreErrorResponseType, CoreGenderClaim, CoreJsonWebKey,
    CoreJweContentEncryptionAlgorithm, CoreJwsSigningAlgorithm, CoreRevocableToken,
    CoreRevocationErrorResponse, CoreTokenIntrospectionResponse, CoreTokenType,
};
use openidconnect::{
    AdditionalClaims, EmptyExtraTokenFields, EndpointMaybeSet, EndpointNotSet, EndpointSet,
    IdTokenClaims, IdTokenFields, StandardErrorResponse, StandardTokenResponse,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Additional ID-token claims: everything the standard claims do not name (`groups`…).
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub(super) struct OtherClaims {
    #[serde(flatten)]
    claims: serde_json::Map<String, Value>,
}

impl AdditionalClaims for OtherClaims {}

type Fields = IdTokenFields<
    OtherClaims,
    EmptyExtraTokenFields,
    CoreGenderClaim,
    CoreJweContentEncryptionAlgorithm,
    CoreJwsSigningAlgorithm,
>;
pub(super) type TokenResponse = StandardTokenResponse<Fields, CoreTokenType>;
pub(super) type Claims = IdTokenClaims<OtherClaims, CoreGenderClaim>;
pub(super) type OidcClient = openidconnect::Client<
    OtherClaims,
    CoreAuthDisplay,
    CoreGenderClaim,
    CoreJweContentEncryptionAlgorithm,
    CoreJsonWebKey,
    CoreAuthPrompt,
    StandardErrorResponse<CoreErrorResponseType>,
    TokenResponse,
    CoreTokenIntrospectionResponse,
    CoreRevocableToken,
    CoreRevocationErrorResponse,
    EndpointSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointMaybeSet,
    EndpointMaybeSet,
>;
