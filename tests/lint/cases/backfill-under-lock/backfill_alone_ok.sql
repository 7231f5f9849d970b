UPDATE users SET plan = 'free' WHERE id BETWEEN 1 AND 5000;
