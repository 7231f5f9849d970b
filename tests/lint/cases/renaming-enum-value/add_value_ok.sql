ALTER TYPE order_status ADD VALUE IF NOT EXISTS 'cancelled';
