//! Objects the tests of one control plane may share.

use kube::Api;
use kube::api::PostParams;
use serde_json::Value;

use crate::Error;

/// Creates `object` (the JSON of a `K`), or leaves the one of its name that exists
/// (cluster-scoped objects such as a DeviceClass are shared by the tests of one
/// control plane).
pub async fn create_or_keep<K>(api: &Api<K>, object: Value) -> Result<(), Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let object: K = serde_json::from_value(object).map_err(kube::Error::SerdeError)?;
    match api.create(&PostParams::default(), &object).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}
