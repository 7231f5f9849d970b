"""add orgs.plan and a plans table

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("orgs", sa.Column("plan", sa.Text, nullable=True))
    op.create_table("plans", sa.Column("name", sa.Text, primary_key=True))
    config = op.get_context().config
    if config is not None and config.attributes.get("break_0003"):
        op.execute("SELECT 1 / 0")  # tests: fail after the first two operations


def downgrade() -> None:
    op.drop_table("plans")
    op.drop_column("orgs", "plan")
