//! (temporary stand-in; the real validator lands with the built-in auditor)

use thiserror::Error;

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Findings {
    pub(crate) findings: Vec<serde_json::Value>,
}

#[derive(Debug, Error)]
pub(crate) enum FindingsError {
    #[error("invalid findings: {0}")]
    Invalid(String),
}

pub(crate) fn validate(bytes: &[u8]) -> Result<Findings, FindingsError> {
    serde_json::from_slice(bytes).map_err(|e| FindingsError::Invalid(e.to_string()))
}

pub(crate) fn extract_json(text: &str) -> Option<&str> {
    let start = text.find('{')?;
    let end = text.rfind('}')?;
    (start < end).then(|| &text[start..=end])
}
