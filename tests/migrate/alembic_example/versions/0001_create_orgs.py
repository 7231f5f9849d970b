"""create orgs

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table("orgs", sa.Column("id", sa.Integer, primary_key=True),
                    sa.Column("name", sa.Text, nullable=False))
    op.execute("INSERT INTO orgs SELECT g, 'org ' || g FROM generate_series(1, 50) g")


def downgrade() -> None:
    op.drop_table("orgs")
