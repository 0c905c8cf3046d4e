"""The lake's own JSON documents beside the tables: how they are stored (``storage``), their format versions
and upgrades (``versions``), the snapshot's plans and manifests (``snapshot``), the table schemas the
stream's checkpoint names (``schema_documents``) and the checkpoint itself (``checkpoint``)."""
