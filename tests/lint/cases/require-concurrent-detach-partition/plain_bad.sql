ALTER TABLE measurements DETACH PARTITION measurements_2019;
