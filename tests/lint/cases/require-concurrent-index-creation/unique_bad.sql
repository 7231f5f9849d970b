CREATE UNIQUE INDEX users_email_key ON public.users (email);
