from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("judges", "0007_judge_batches")]

    operations = [
        # Judges registered before keep the old behaviour (off); new ones get it on (the AlterField).
        migrations.AddField(model_name="judge", name="adapt_parameters", field=models.BooleanField(default=False)),
        migrations.AlterField(model_name="judge", name="adapt_parameters", field=models.BooleanField(default=True)),
        migrations.AddField(model_name="judge", name="learned_parameters",
                            field=models.JSONField(blank=True, default=dict)),
    ]
