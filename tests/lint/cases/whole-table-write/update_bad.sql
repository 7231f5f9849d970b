UPDATE users SET plan = 'free';
