//! Addresses the proxy refuses whatever name led to them.
