LOCK users;
