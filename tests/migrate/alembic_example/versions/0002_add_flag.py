"""add orgs.flag: a nullable column, a brief ACCESS EXCLUSIVE lock

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("orgs", sa.Column("flag", sa.Boolean, nullable=True))


def downgrade() -> None:
    op.drop_column("orgs", "flag")
