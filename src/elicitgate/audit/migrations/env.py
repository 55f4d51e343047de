"""Alembic's environment for the audit store: always run by `elicitgate.audit.store.migrate` with a
connection already open (`config.attributes["connection"]`), never from an alembic.ini."""

from alembic import context

from elicitgate.audit.schema import VERSION_TABLE, metadata

context.configure(
    connection=context.config.attributes["connection"],
    target_metadata=metadata,
    version_table=VERSION_TABLE,
    render_as_batch=True,  # SQLite alters tables by copying them
)
with context.begin_transaction():
    context.run_migrations()
