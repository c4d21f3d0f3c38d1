"""Conversion between the versions of a custom resource, and what follows from them.

Pure functions over plain data (the objects as JSON gives them), apart from `migration`:

    paths      a field's place in an object (`spec.database.replicas`); copy-on-write
               get / place / remove, JSON pointers
    field_map  a watches.yaml `fieldMap`: moves, splits by a format, defaults, each way
    schema     a version's structural schema: what the API server prunes of an object
    fidelity   what one version cannot hold, kept in an annotation and restored
    converter  one kind's conversions: each version to and from the hub, field maps in
               process, roles through a callback; losses kept, output checked
    review     the ConversionReview the API server sends, and the answer
    crd_changes  what `check` finds unsafe between two CRDs of one kind
    migration  stored objects rewritten in the storage version; storedVersions trimmed
"""
