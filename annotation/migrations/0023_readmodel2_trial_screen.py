"""Trial.screen: what a trial's screen reads, stored on the row (decision 0079); existing trials are filled."""

from django.db import migrations, models


def fill(apps, schema_editor):
    from annotation.services.trial_screens import trial_screens_fill

    trial_screens_fill(
        trial_model=apps.get_model("annotation", "Trial"), axis_model=apps.get_model("annotation", "Axis")
    )


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0022_truth_ground_truth"),
    ]

    operations = [
        migrations.AddField(
            model_name="trial",
            name="screen",
            field=models.JSONField(blank=True, editable=False, null=True),
        ),
        migrations.RunPython(fill, migrations.RunPython.noop),
    ]
